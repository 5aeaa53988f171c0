// Preview single-page app: lists the chat's outputs (newest first), refreshes on its own and previews
// the selected file. Every remote string reaches the DOM through textContent or after DOMPurify; agent
// HTML only runs inside a sandboxed iframe without allow-same-origin (docs/contract.md#preview-page);
// agent documents are parsed only in a token-less worker (parse.js). The token stays in this module.
import { el } from './dom.js'
import { badgeFor, renderPreview } from './renderers.js'

const config = JSON.parse(document.getElementById('config').textContent)
// The server's root: the page's parent here; given absolute where the app runs in a chat host's frame (an MCP Apps view).
config.base ??= new URL('../', window.location.href).href
const POLL_VISIBLE_MS = 3000
const POLL_HIDDEN_MS = 15000
// A listing request that stalls (a dropped connection the browser still waits on) is given up after
// this long and the next poll tries again, instead of leaving the page waiting for ever.
const LIST_TIMEOUT_MS = 10000

// The token stays in memory only: strip it from the address bar (and so from history and bookmarks).
const here = new URL(window.location.href)
if (here.searchParams.has('t')) {
  here.searchParams.delete('t')
  // An opaque-origin frame (Open WebUI's sandboxed embed) may refuse history changes; the page works anyway.
  try { window.history.replaceState(null, '', here.pathname + here.search + here.hash) } catch {}
}

const $ = id => document.getElementById(id)
const app = $('app')
const state = { files: [], selected: null, shown: null, signature: '', timer: null, failures: 0 }

$('chat-id').textContent = config.chatId
$('chat-id').title = `Chat ${config.chatId}`
const archiveHref = new URL(`${config.filesBase}/archive`, config.base).href

export function formatSize (bytes) {
  if (bytes < 1024) return `${bytes} B`
  const units = ['KB', 'MB', 'GB', 'TB']
  let value = bytes
  let unit = -1
  do { value /= 1024; unit++ } while (value >= 1024 && unit < units.length - 1)
  return `${value >= 10 ? value.toFixed(0) : value.toFixed(1)} ${units[unit]}`
}

function formatAge (seconds) {
  const diff = Math.max(0, Date.now() / 1000 - seconds)
  if (diff < 45) return 'just now'
  if (diff < 3600) return `${Math.round(diff / 60)} min ago`
  if (diff < 86400) return `${Math.round(diff / 3600)} h ago`
  if (diff < 7 * 86400) return `${Math.round(diff / 86400)} d ago`
  return new Date(seconds * 1000).toLocaleDateString()
}

const downloadHref = file => `${file.url}?download=1`

function renderList () {
  const list = $('file-list')
  const total = state.files.length
  $('count').textContent = total === 0 ? 'No files yet' : `${total} file${total === 1 ? '' : 's'}${state.truncated ? ' (newest shown)' : ''}`
  const all = $('download-all')
  all.href = total === 0 ? '#' : archiveHref
  all.setAttribute('aria-disabled', total === 0 ? 'true' : 'false')
  list.replaceChildren(...state.files.map(file => {
    const dir = file.path.includes('/') ? file.path.slice(0, file.path.lastIndexOf('/')) : ''
    const button = el('button', { type: 'button', className: 'file', title: file.path, dataset: { path: file.path, type: file.type } }, [
      badgeFor(file),
      el('span', { className: 'file-main' }, [
        el('span', { className: 'file-name', text: file.name }),
        el('span', { className: 'file-meta' }, [
          dir === '' ? '' : el('span', { className: 'file-dir', text: `${dir}/ · ` }),
          `${formatSize(file.size)} · `,
          el('time', { datetime: new Date(file.modified * 1000).toISOString(), title: new Date(file.modified * 1000).toLocaleString(), text: formatAge(file.modified) })
        ])
      ]),
      el('a', { className: 'file-download', href: downloadHref(file), download: file.name, title: `Download ${file.name}`, 'aria-label': `Download ${file.name}`, text: '⤓' })
    ])
    button.addEventListener('click', event => {
      if (event.target.closest('a')) return
      select(file.path)
    })
    const item = el('li', { dataset: { path: file.path } }, [button])
    if (file.path === state.selected) item.classList.add('selected')
    return item
  }))
}

function showViewerHead (file) {
  $('viewer-head').hidden = file === null
  if (file === null) return
  $('viewer-icon').replaceChildren(badgeFor(file))
  $('viewer-name').textContent = file.path
  $('viewer-meta').textContent = ` · ${formatSize(file.size)} · ${new Date(file.modified * 1000).toLocaleString()}`
  $('open-file').href = file.url
  $('download-file').href = downloadHref(file)
  $('download-file').setAttribute('download', file.name)
}

function renderEmpty () {
  showViewerHead(null)
  state.shown = null
  const target = $('preview')
  target.dataset.type = 'empty'
  target.replaceChildren(el('div', { className: 'empty' }, [
    el('div', { className: 'empty-art', 'aria-hidden': 'true' }),
    el('h2', { text: 'No outputs yet' }),
    el('p', { text: 'Files the assistant saves to /mnt/user-data/outputs appear here automatically.' })
  ]))
}

async function showSelected () {
  const file = state.files.find(f => f.path === state.selected) ?? null
  if (file === null) { renderEmpty(); return }
  const key = `${file.path}|${file.size}|${file.modified}`
  if (state.shown === key) return
  state.shown = key
  showViewerHead(file)
  await renderPreview(file, $('preview'), { stillCurrent: () => state.shown === key, downloadHref: downloadHref(file), parseTimeoutMs: config.parseTimeoutMs, guardKey: `${config.chatId}|${key}` })
}

function select (path) {
  state.selected = path
  for (const item of $('file-list').children) item.classList.toggle('selected', item.dataset.path === path)
  showSelected()
}

// Open mode has no tokens, and chat routes answer a page with an opaque origin (a sandboxed iframe,
// as Open WebUI embeds this page) only when it presents one (docs/architecture.md#security-model): such a frame
// cannot read the listing or open the live views, so it says what to do instead of retrying.
const openModeInOpaqueFrame = window.origin === 'null' && config.token === null

function banner (text) {
  $('banner').hidden = text === ''
  $('banner').textContent = text
}

async function refresh () {
  try {
    const res = await fetch(new URL(config.apiUrl, config.base), { cache: 'no-store', credentials: 'omit', signal: AbortSignal.timeout(LIST_TIMEOUT_MS) })
    if (res.status === 401 || res.status === 403) {
      banner('This link has expired or is not valid. Ask the assistant for a fresh preview link.')
      app.dataset.state = 'denied'
      return false
    }
    if (!res.ok) throw new Error(`HTTP ${res.status}`)
    const body = await res.json()
    state.failures = 0
    banner('')
    const signature = JSON.stringify(body.files.map(f => [f.path, f.size, f.modified]))
    if (signature !== state.signature || app.dataset.state === 'loading') {
      state.signature = signature
      // Listing URLs are paths: made absolute, so links and fetches reach the server from a host's frame too.
      state.files = body.files.map(f => ({ ...f, url: new URL(f.url, config.base).href }))
      state.truncated = body.truncated === true
      if (state.selected === null || !state.files.some(f => f.path === state.selected)) state.selected = state.files[0]?.path ?? null
      renderList()
      await showSelected()
    }
    app.dataset.state = state.files.length === 0 ? 'empty' : 'ready'
  } catch {
    if (openModeInOpaqueFrame) {
      banner('This server runs without MCP_API_KEY (open mode), so it does not answer an embedded, sandboxed frame like this one. Open the preview in its own browser tab, or set MCP_API_KEY on the server.')
      app.dataset.state = 'denied'
      return false
    }
    state.failures++
    if (state.failures >= 2) banner('Connection lost. Retrying…')
  }
  return true
}

function schedule () {
  clearTimeout(state.timer)
  state.timer = setTimeout(async () => {
    if (await refresh()) schedule()
  }, document.hidden ? POLL_HIDDEN_MS : POLL_VISIBLE_MS)
}

document.addEventListener('visibilitychange', () => {
  if (document.hidden) { schedule(); return }
  clearTimeout(state.timer)
  refresh().then(ok => { if (ok) schedule() })
})
$('download-all').addEventListener('click', event => {
  if (state.files.length === 0) event.preventDefault()
})

refresh().then(ok => { if (ok) schedule() })

// Views. Full scope (control token, API key, open mode) adds the live Browser (browser-view.js,
// mounted at once so its tab shows whether the browser runs), the Terminal (terminal-view.js) and,
// with an egress proxy, the Network log (network-view.js) and, with app preview URLs, the Apps list
// (apps-view.js), mounted on first show, beside
// Outputs. A view is told when it is shown or hidden.
const views = {}
const mounts = {
  browser: () => import('./browser-view.js').then(m => m.mountBrowserView(config)),
  terminal: () => import('./terminal-view.js').then(m => m.mountTerminal($('terminal-pane'), config)),
  network: () => import('./network-view.js').then(m => m.mountNetworkView($('network-pane'), config)),
  apps: () => import('./apps-view.js').then(m => m.mountAppsView($('apps-pane'), config))
}
if (config.egress == null) delete mounts.network
if (config.apps == null) delete mounts.apps
const VIEW_HASHES = { '#browser': 'browser', '#terminal': 'terminal', '#network': 'network', '#apps': 'apps' }
const mount = name => { views[name] ??= mounts[name]().catch(err => { delete views[name]; throw err }) }

async function showView (name) {
  for (const tab of document.querySelectorAll('#views [data-view]')) tab.setAttribute('aria-selected', String(tab.dataset.view === name))
  if (name in mounts) {
    try { mount(name); await views[name] } catch { banner(`The ${name} view could not be loaded.`); name = 'outputs' }
  }
  for (const pane of document.querySelectorAll('[data-view-pane]')) pane.hidden = pane.dataset.viewPane !== name
  for (const [key, view] of Object.entries(views)) view.then(v => v.visible(key === name), () => {})
}

if (config.scope === 'full' && !openModeInOpaqueFrame) {
  $('views').hidden = false
  for (const tab of document.querySelectorAll('#views [data-view]')) tab.addEventListener('click', () => { void showView(tab.dataset.view) })
  mount('browser')
  void showView(VIEW_HASHES[window.location.hash] ?? (config.view in mounts ? config.view : 'outputs'))
}
