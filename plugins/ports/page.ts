import { escapeHtml } from '../../core/html.js'

const HINTS: Record<number, string> = {
  400: 'Check the address: /apps/&lt;chat&gt;/&lt;port&gt;/ with a port from 1024 to 65535.',
  401: 'Open the app from its link in the chat or from the Apps view of the preview page: the link carries the key.',
  403: 'This link belongs to another chat, has expired or gives read-only access: open the app from its own chat.',
  404: 'The sandbox is stopped. Run any command in the chat to start it, start the app again, then reload.',
  409: 'The sandbox is stopped. Run any command in the chat to start it, start the app again, then reload.',
  429: 'Too many connections to this chat\'s apps right now; reload in a moment.',
  502: 'Nothing answered on this port inside the sandbox. Start the app (listening on 0.0.0.0 or 127.0.0.1), then reload.',
  504: 'The app did not answer in time.'
}

/** The page a browser navigation gets when the app cannot be reached (no script, nothing loaded). */
export function errorPage (status: number, message: string): string {
  const hint = HINTS[status] ?? ''
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>App unavailable (${status})</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:4em auto;padding:0 1em;color:#222}code{background:#eee;padding:0 .2em}</style></head>
<body><h1>App unavailable</h1><p>${escapeHtml(message)}</p><p>${hint}</p><p><small>HTTP ${status}</small></p></body></html>`
}
