// The MCP Apps view (docs/features.md#views-in-the-chat-mcp-apps): the preview app of plugins/preview/public,
// bundled into the ui:// resource, inside a chat host's sandboxed frame. It connects to the host with the
// official ext-apps App; the per-chat config (server URL, chat id, token) arrives only with a tool result's
// `_meta["cubicle/view"]`, never in the resource, and stays in memory. A result without one (a command
// that changed no outputs) leaves the view empty and zero-height.
import { App } from '@modelcontextprotocol/ext-apps/app-with-deps'

const META_KEY = 'cubicle/view'
const VIEWS = new Set(['browser', 'terminal', 'files'])
const app = new App({ name: 'Cubicle', version: '1' }, {}, { autoResize: true })
const root = document.documentElement
let started = false

/** The config the server put in the result, or null when it holds none or not the expected shape. */
function viewConfig (result) {
  const config = result?._meta?.[META_KEY]
  if (config === null || typeof config !== 'object') return null
  if (typeof config.chatId !== 'string' || typeof config.base !== 'string' || !VIEWS.has(config.view)) return null
  if (!/^https?:\/\//.test(config.base)) return null
  return config
}

async function start (config) {
  started = true
  root.dataset.state = 'shown'
  document.getElementById('config').textContent = JSON.stringify({ ...config, view: config.view === 'files' ? 'outputs' : config.view })
  await import('cubicle-preview/app.js')
}

app.ontoolresult = result => {
  const config = viewConfig(result)
  if (config === null) return
  if (!started) { void start(config); return }
  // A later result of the same chat shows its view (a browser command after a file was written).
  document.getElementById(`view-${config.view === 'files' ? 'outputs' : config.view}`)?.click()
}

root.dataset.state = 'waiting'
app.connect().then(() => { root.dataset.connected = 'true' }, err => {
  root.dataset.connected = 'false'
  document.getElementById('banner').hidden = false
  document.getElementById('banner').textContent = `The view could not connect to the chat: ${err?.message ?? err}`
})
