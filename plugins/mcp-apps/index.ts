import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import Type from 'typebox'
import type { CallToolResult, JSONObject } from '@modelcontextprotocol/server'
import type { ChatRequestContext, ToolCallContext } from '../mcp-transport/types.js'
import type { AppViewName as ViewName } from '../preview/types.js'

/** The MCP Apps extension identifier (SEP-1865), as clients declare it in `capabilities.extensions`. */
export const APPS_EXTENSION = 'io.modelcontextprotocol/ui'
const VIEW_NAMES: readonly ViewName[] = ['browser', 'terminal', 'files']

/** The MCP Apps resource type (SEP-1865). */
export const VIEW_MIME = 'text/html;profile=mcp-app'
/** Where a tool result carries the per-chat config of its view (docs/features.md#views-in-the-chat-mcp-apps). */
export const VIEW_META_KEY = 'cubicle/view'
const uriOf = (view: ViewName): string => `ui://cubicle/${view}`
/** A command that runs the `browser` CLI (at the start, or after a separator): its result shows the browser view. */
const BROWSER_COMMAND = /(?:^|[;&|(\n]\s*)browser\s/
/** The line bash_tool appends when the call created or changed outputs (workspace-tools bash-result.ts). */
const OUTPUTS_LINE = '\n\n[Files created or modified in /mnt/user-data/outputs: '

const ShowComputerInput = Type.Object({
  view: Type.Optional(Type.Union(VIEW_NAMES.map(v => Type.Literal(v)), { default: 'browser', description: 'browser: the live browser (take over with mouse and keyboard); terminal: the shell; files: the outputs' }))
})

/**
 * MCP Apps (SEP-1865, extension `io.modelcontextprotocol/ui`): the preview app's views inside the chat.
 * Only clients that declared the extension see anything of it: the ui:// resources, `show_computer`, the
 * view reference on bash_tool and the view config on its results. Everyone else gets the plain five-tool
 * contract, byte for byte; removing this plugin's manifest line does the same for every client.
 */
const mcpApps: FastifyPluginAsync = async fastify => {
  const { mcp, links, previewPage } = fastify
  const root = `${links.publicBaseUrl}/`
  const origin = new URL(root).origin
  // Only our origin: fetches and sockets (ws/wss spelled out: CSP hosts differ on whether http covers ws),
  // stylesheets, the vendored parsers and images, and the sandboxed frame an agent HTML file is shown in.
  const csp = { connectDomains: [origin, origin.replace(/^http/, 'ws')], resourceDomains: [origin], frameDomains: [origin] }
  const declared = (ctx: { clientExtensions?: ReadonlySet<string> }): boolean => ctx.clientExtensions?.has(APPS_EXTENSION) === true

  /** The view's config for a chat: the preview config of a control token (browser, terminal) or a files token (files). */
  function viewConfig (chatId: string, view: ViewName): JSONObject {
    const used = links.token(chatId, view === 'files' ? 'f' : 'c')
    const config = previewPage.config(chatId, used)
    return { ...config, egress: null, apps: null, base: root, view } as unknown as JSONObject
  }
  const withView = (result: CallToolResult, chatId: string, view: ViewName): CallToolResult =>
    ({ ...result, _meta: { ...result._meta, [VIEW_META_KEY]: viewConfig(chatId, view) } })

  mcp.addResourceProvider({
    async list (ctx: ChatRequestContext) {
      if (!declared(ctx)) return []
      return VIEW_NAMES.map(view => ({ uri: uriOf(view), name: `cubicle-${view}`, title: `Cubicle ${view} view`, mimeType: VIEW_MIME }))
    },
    async read (uri: string, ctx: ChatRequestContext) {
      const view = VIEW_NAMES.find(v => uriOf(v) === uri)
      if (view === undefined || !declared(ctx)) return undefined
      return [{ uri, mimeType: VIEW_MIME, text: await previewPage.appView(view), _meta: { ui: { csp, prefersBorder: true } } }]
    }
  })

  mcp.addTool({
    name: 'show_computer',
    extension: APPS_EXTENSION,
    order: 60,
    description: 'Show this chat\'s computer to the user inside the chat: the live browser (the user can take over with mouse and keyboard), ' +
      'the terminal, or the files in /mnt/user-data/outputs. Use it when the user wants to watch or act, e.g. to log in.',
    inputSchema: ShowComputerInput,
    annotations: { title: 'Show the computer', readOnlyHint: true, destructiveHint: false, openWorldHint: false },
    _meta: { ui: { resourceUri: uriOf('browser') } },
    handler: async (args, ctx: ToolCallContext) => {
      const view: ViewName = (args.view as ViewName | undefined) ?? 'browser'
      const text = `The ${view} view of this chat's computer is shown in the chat. The same views in a browser tab: ${links.previewUrl(ctx.chatId, view === 'files' ? 'f' : 'c')}`
      return withView({ content: [{ type: 'text', text }] }, ctx.chatId, view)
    }
  })

  // bash_tool opens on the files view; its results name the view to show (browser commands, changed outputs) or none.
  mcp.transformToolList(tools => tools.map(tool => tool.name === 'bash_tool' ? { ...tool, _meta: { ...tool._meta, ui: { resourceUri: uriOf('files') } } } : tool), { extension: APPS_EXTENSION })
  mcp.transformToolResult(APPS_EXTENSION, async ({ tool, args, result, ctx }) => {
    if (tool !== 'bash_tool') return result
    const command = typeof args.command === 'string' ? args.command : ''
    if (BROWSER_COMMAND.test(command)) return withView(result, ctx.chatId, 'browser')
    const text = result.content.map(block => block.type === 'text' ? block.text : '').join('')
    return text.includes(OUTPUTS_LINE) ? withView(result, ctx.chatId, 'files') : result
  })
}

export default fp(mcpApps, {
  name: 'mcp-apps',
  fastify: '5.x',
  dependencies: ['mcp-transport', 'capabilities', 'preview'],
  decorators: { fastify: ['mcp', 'links', 'previewPage'] }
})
