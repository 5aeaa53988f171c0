import type { FastifyPluginAsync } from 'fastify'
import { chatAccess, chatOf, chatRoutes, linkToken } from '../../core/route-kit.js'
import { ChatParams, ChatQuery, HAND_CHECKED, mediaReply } from '../../core/route-schema.js'
import { newNonce, pageHead, scriptJson, sendPage } from './page.js'

export interface TerminalPageOptions { frameAncestors: string }

/** The full-window terminal's HTML shell: config as JSON data, assets relative (`../static/…`), one nonced module. */
export function renderTerminalPage (config: { chatId: string, token: string | null }, nonce: string): string {
  return `<!doctype html>
<html lang="en">
${pageHead(`Terminal · ${config.chatId}`, [
  '<link rel="stylesheet" href="../static/vendor/xterm/css/xterm.css">',
  '<link rel="stylesheet" href="../static/preview/terminal.css">'
])}
<body class="term-page">
<script type="application/json" id="config">${scriptJson(config)}</script>
<div id="terminal" class="term-full"></div>
<script type="module" nonce="${nonce}" src="../static/preview/terminal-page.js"></script>
</body>
</html>
`
}

/**
 * GET /terminal/{chat}: the terminal alone, full window (the terminal plugin serves the routes the
 * page talks to). A control token or the API key is required: a files token never opens a shell
 * (docs/contract.md#capability-tokens). Same CSP as the preview page (docs/contract.md#preview-page).
 */
const terminalPage: FastifyPluginAsync<TerminalPageOptions> = async (fastify, opts) => {
  const { auth, links } = fastify
  chatRoutes(fastify, ['/terminal/:chat'])
  fastify.get<{ Params: { chat: string } }>('/terminal/:chat', {
    ...HAND_CHECKED,
    schema: { summary: 'The full-window web terminal page (HTML)', tags: ['terminal'], params: ChatParams, querystring: ChatQuery, produces: ['text/html'], response: { 200: mediaReply('the terminal page', ['text/html']) } },
    preHandler: chatAccess('c')
  }, async (request, reply) => {
    const chatId = chatOf(request)
    // An API-key opener (a server-side client) gets a control token for the page; open mode has none.
    const token = auth.protectedMode ? linkToken(request) ?? links.token(chatId, 'c') ?? null : null
    const nonce = newNonce()
    return await sendPage(reply, renderTerminalPage({ chatId, token }, nonce), opts.frameAncestors, nonce)
  })
}

export default terminalPage
