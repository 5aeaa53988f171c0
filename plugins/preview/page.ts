import { randomBytes } from 'node:crypto'
import type { FastifyReply } from 'fastify'
import { escapeHtml } from '../../core/html.js'
import type { PreviewConfig } from './schemas.js'

/** JSON safe inside a `<script>` block: `<`, `>`, `&`, U+2028 and U+2029 escaped (docs/contract.md#preview-page). */
export function scriptJson (value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
}

/** A fresh CSP nonce per response: 128 random bits, base64 (never reused, never derived from request data). */
export const newNonce = (): string => randomBytes(16).toString('base64')

/**
 * The response CSP of the page: docs/contract.md#preview-page, made stricter (see README "Deviations").
 * - `script-src 'nonce-…' 'strict-dynamic'` instead of `'self'`: `'self'` also trusts every agent-written `.js`
 *   under `/files`; now only the page's own nonced module runs, plus what it loads itself (vendored libraries).
 * - `worker-src blob:`: the document parsers run in a dedicated worker the page builds from a blob bootstrap
 *   (an opaque-origin embed cannot start a worker from a URL); no worker from any server path.
 * - `object-src 'none'; base-uri 'none'`: no plugins, and no injected `<base>` can re-point the nonced script.
 */
export function pageCsp (frameAncestors: string, nonce: string): string {
  return `default-src 'self'; script-src 'nonce-${nonce}' 'strict-dynamic'; worker-src blob:; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; frame-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors ${frameAncestors}`
}

/** Sends a page shell rendered with `nonce`: the page CSP, never cached, never sniffed (docs/contract.md#preview-page). */
export async function sendPage (reply: FastifyReply, html: string, frameAncestors: string, nonce: string): Promise<FastifyReply> {
  return await reply
    .header('Content-Type', 'text/html; charset=utf-8')
    .header('Content-Security-Policy', pageCsp(frameAncestors, nonce))
    .header('Cache-Control', 'no-cache, no-store, must-revalidate')
    .header('X-Content-Type-Options', 'nosniff')
    .send(html)
}

/**
 * The `<head>` both page shells share: charset, viewport, no referrer (a token in the address must not
 * leak to other sites), the title (escaped) and favicon, then the page's own stylesheet links (constants).
 */
export function pageHead (title: string, links: readonly string[], root = '../'): string {
  return `<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="${root}static/preview/favicon.svg" type="image/svg+xml">
${links.join('\n')}
</head>`
}

/** The stylesheets of the app shell, below `root` (the page's `../`, or the server's URL for the MCP Apps view). */
export const appStyles = (root: string): string[] => [
  `<link rel="stylesheet" href="${root}static/preview/app.css">`,
  `<link rel="stylesheet" href="${root}static/vendor/highlight/styles/github.min.css" media="(prefers-color-scheme: light)">`,
  `<link rel="stylesheet" href="${root}static/vendor/highlight/styles/github-dark.min.css" media="(prefers-color-scheme: dark)">`
]

/**
 * The app's markup (top bar, outputs, panes), shared by the page and the MCP Apps view (plugins/mcp-apps):
 * Network and Apps tabs only when the config offers them.
 */
export function appShell (config: Pick<PreviewConfig, 'egress' | 'apps'>): string {
  return `<div id="app" class="app" data-state="loading">
  <header class="topbar">
    <div class="brand"><span class="logo" aria-hidden="true"></span><span class="title">Outputs</span><code class="chat" id="chat-id"></code></div>
    <div class="views" id="views" role="tablist" aria-label="Views" hidden>
      <button type="button" role="tab" id="view-outputs" data-view="outputs" aria-selected="true">Outputs</button>
      <button type="button" role="tab" id="view-browser" data-view="browser" aria-selected="false"><span class="browser-dot" id="browser-dot" aria-hidden="true"></span>Browser</button>
      <button type="button" role="tab" id="view-terminal" data-view="terminal" aria-selected="false">Terminal</button>
${config.egress === null ? '' : '      <button type="button" role="tab" id="view-network" data-view="network" aria-selected="false">Network</button>\n'}${config.apps === null ? '' : '      <button type="button" role="tab" id="view-apps" data-view="apps" aria-selected="false">Apps</button>\n'}    </div>
    <div class="actions">
      <span class="live" id="live" title="Refreshes automatically">live</span>
      <a class="button primary" id="download-all" href="#" download aria-disabled="true">Download all</a>
    </div>
  </header>
  <main class="layout" data-view-pane="outputs">
    <nav class="sidebar" aria-label="Output files">
      <div class="sidebar-head"><span id="count">Loading…</span></div>
      <ul class="file-list" id="file-list"></ul>
    </nav>
    <section class="viewer" id="viewer" aria-live="polite">
      <div class="viewer-head" id="viewer-head" hidden>
        <div class="viewer-title"><span class="viewer-icon" id="viewer-icon"></span><span id="viewer-name"></span><span class="muted" id="viewer-meta"></span></div>
        <div class="actions">
          <a class="button" id="open-file" href="#" target="_blank" rel="noopener noreferrer">Open</a>
          <a class="button" id="download-file" href="#" download>Download</a>
        </div>
      </div>
      <div class="preview" id="preview"></div>
    </section>
  </main>
  <section class="pane" id="terminal-pane" data-view-pane="terminal" aria-label="Terminal" hidden></section>
  <section class="pane" id="network-pane" data-view-pane="network" aria-label="Network" hidden></section>
  <section class="pane" id="apps-pane" data-view-pane="apps" aria-label="Apps" hidden></section>
  <div class="banner" id="banner" hidden></div>
</div>`
}

/**
 * The HTML shell. Asset URLs are relative (`../static/…` from `/preview/{chat}`), so a reverse proxy that
 * mounts the server below a path prefix keeps working. The config is data, not script: CSP never runs it.
 */
export function renderPage (config: PreviewConfig, nonce: string): string {
  return `<!doctype html>
<html lang="en">
${pageHead(`Outputs · ${config.chatId}`, appStyles('../'))}
<body>
<script type="application/json" id="config">${scriptJson(config)}</script>
${appShell(config)}
<script type="module" nonce="${nonce}" src="../static/preview/app.js"></script>
</body>
</html>
`
}
