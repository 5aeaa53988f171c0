/*
 * The sign-in, consent and error pages: server-rendered HTML without any script, in the palette of
 * the preview app. Every dynamic value goes through `esc`. Served with PAGE_CSP (no script, no
 * framing: a consent button in someone else's frame would be clickjacking).
 */
import { escapeHtml as esc } from '../../core/html.js'
import type { Destination } from './destination.js'

export const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; base-uri 'none'"

const STYLE = `:root{--bg:#f6f7fb;--panel:#fff;--text:#1f2330;--muted:#6b7280;--line:#e5e7ef;--accent:#4f46e5;--accent-text:#fff;--bad:#b42318;--bad-soft:#fef3f2;color-scheme:light dark}
@media (prefers-color-scheme:dark){:root{--bg:#0f1117;--panel:#171a22;--text:#e6e8ef;--muted:#9aa1b2;--line:#272b36;--accent:#818cf8;--accent-text:#0f1117;--bad:#fda29b;--bad-soft:#2a1715}}
*{box-sizing:border-box}body{margin:0;min-height:100vh;display:grid;place-items:center;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--text)}
main{width:min(420px,calc(100vw - 32px));background:var(--panel);border:1px solid var(--line);border-radius:12px;padding:28px;box-shadow:0 1px 2px rgba(16,24,40,.06)}
h1{font-size:18px;margin:0 0 4px}p{margin:8px 0;color:var(--muted)}strong,code{color:var(--text)}code{font:12px ui-monospace,Menlo,Consolas,monospace}
.brand{display:flex;align-items:center;gap:10px;margin-bottom:18px;font-weight:650}.logo{width:22px;height:22px;border-radius:6px;background:var(--accent)}
label{display:block;font-weight:550;margin:14px 0 4px}input{width:100%;padding:8px 10px;border:1px solid var(--line);border-radius:8px;background:var(--bg);color:var(--text);font:inherit}
.hint{font-size:12px;margin:4px 0 0}.row{display:flex;gap:8px;margin-top:20px}
button,.button{flex:1;display:inline-flex;justify-content:center;padding:8px 12px;border-radius:8px;border:1px solid var(--line);background:var(--panel);color:var(--text);font:inherit;font-weight:550;cursor:pointer;text-decoration:none}
.primary{background:var(--accent);border-color:var(--accent);color:var(--accent-text)}.error{background:var(--bad-soft);color:var(--bad);border-radius:8px;padding:8px 10px;margin:12px 0}
.or{text-align:center;font-size:12px;margin:18px 0 0}
.dest-label{margin:14px 0 2px}.dest{margin:0 0 8px;font-size:20px;font-weight:650;overflow-wrap:anywhere}.dest code{font:inherit;font-family:ui-monospace,Menlo,Consolas,monospace}`

function layout (title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${esc(title)} · Cubicle</title><style>${STYLE}</style></head>
<body><main><div class="brand"><span class="logo" aria-hidden="true"></span>Cubicle</div>${body}</main></body></html>`
}

export interface ClientView {
  /** The client's own name (DCR `client_name`), untrusted: shown only as what the app calls itself. */
  name: string
  /** Where this request's code goes: the host of its redirect_uri (ASCII), so a look-alike name cannot hide it. */
  destination: Destination
  /** For a client_id URL (a Client ID Metadata Document): the host (ASCII) that published the name and redirect URIs. */
  publisher?: string
}

const KIND: Record<Destination['kind'], string> = {
  web: 'the website',
  loopback: 'a program on your own device at',
  app: 'an app on your device with the address',
  unknown: ''
}

/**
 * `lead` (HTML) ending in "to", then the host this request hands its code to, large; then the client's
 * self-chosen name, marked as such. A client name is never shown as the destination.
 */
function destinationBlock (client: ClientView, lead: string): string {
  const { destination: d } = client
  if (d.kind === 'unknown') return '<div class="error" role="alert">Where this sign-in would go is unknown. Do not continue; start again from your app.</div>'
  return `<p class="dest-label">${lead} ${esc(KIND[d.kind])}</p><p class="dest"><code data-destination>${esc(d.host)}</code></p>
<p class="hint">The app calls itself <q>${esc(client.name)}</q>, a name anyone can choose${client.publisher === undefined ? '' : ` (its description is published by <strong data-publisher>${esc(client.publisher)}</strong>)`}. Continue only if you started this from <strong>${esc(d.host)}</strong>.</p>`
}

export interface LoginView {
  action: string
  csrf: string
  client: ClientView
  keyLogin: boolean
  /** Link that starts the upstream OpenID Connect sign-in, when configured. */
  oidcUrl?: string
  email?: string
  error?: string
}

export function renderLogin (v: LoginView): string {
  const error = v.error === undefined ? '' : `<div class="error" role="alert">${esc(v.error)}</div>`
  const keyForm = !v.keyLogin
    ? ''
    : `<form method="post" action="${esc(v.action)}">
<input type="hidden" name="csrf" value="${esc(v.csrf)}">
<label for="key">Access key</label><input id="key" name="key" type="password" autocomplete="current-password" required autofocus>
<p class="hint">The server's <code>MCP_API_KEY</code>, from whoever runs this server.</p>
<label for="email">Your email <span class="hint">(optional)</span></label><input id="email" name="email" type="email" autocomplete="email" maxlength="254" value="${esc(v.email ?? '')}">
<p class="hint">Gives you a computer of your own when several people share the key, and names you as git author.</p>
<div class="row"><button class="primary" type="submit">Sign in</button></div></form>`
  const oidc = v.oidcUrl === undefined
    ? ''
    : `${v.keyLogin ? '<p class="or">or</p>' : ''}<div class="row"><a class="button${v.keyLogin ? '' : ' primary'}" href="${esc(v.oidcUrl)}">Sign in with your organisation account</a></div>`
  return layout('Sign in', `<h1>Sign in</h1>${destinationBlock(v.client, 'An app wants to use a computer on this server. Signing in sends its access to')}${error}${keyForm}${oidc}`)
}

export interface ConsentView {
  action: string
  csrf: string
  client: ClientView
  subject: string
}

export function renderConsent (v: ConsentView): string {
  return layout('Allow access', `<h1>Allow access?</h1>
${destinationBlock(v.client, `Allow lets whoever receives this run commands and read and write files in your sandbox computer, signed in as <strong>${esc(v.subject)}</strong>. It goes to`)}
<form method="post" action="${esc(v.action)}"><input type="hidden" name="csrf" value="${esc(v.csrf)}">
<div class="row"><button type="submit" name="decision" value="deny">Deny</button>${v.client.destination.kind === 'unknown' ? '' : '<button class="primary" type="submit" name="decision" value="allow">Allow</button>'}</div></form>`)
}

export function renderErrorPage (error: string, description: string): string {
  return layout('Sign-in problem', `<h1>Sign-in problem</h1><div class="error" role="alert">${esc(error)}</div><p>${esc(description)}</p>
<p>Start again from the app you were connecting (for Claude: Settings → Connectors → Connect).</p>`)
}
