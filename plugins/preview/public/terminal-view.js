// Terminal view: the chat's shell (tmux session `main`, shared with every other viewer) in xterm.js,
// over the terminal plugin's routes (docs/contract.md#terminal). Handles resize, copy and paste, reconnects
// with backoff, and explains a stopped or removed sandbox with a button that starts it. Every
// remote string reaches the DOM through textContent.
import { Terminal } from '../vendor/xterm/lib/xterm.mjs'
import { FitAddon } from '../vendor/xterm-fit/lib/addon-fit.mjs'
import { connectTerminal } from './terminal-client.js'

const THEME = {
  background: '#0f1117',
  foreground: '#e6e8ef',
  cursor: '#e6e8ef',
  selectionBackground: '#3b4261',
  black: '#1f2330',
  red: '#f7768e',
  green: '#9ece6a',
  yellow: '#e0af68',
  blue: '#7aa2f7',
  magenta: '#bb9af7',
  cyan: '#7dcfff',
  white: '#c0caf5',
  brightBlack: '#565f89',
  brightRed: '#ff7a93',
  brightGreen: '#b9f27c',
  brightYellow: '#ff9e64',
  brightBlue: '#7da6ff',
  brightMagenta: '#c89eff',
  brightCyan: '#b4f9f8',
  brightWhite: '#e6e8ef'
}
const PROCESS_POLL_MS = 5000
// An open terminal socket holds the sandbox against the idle reaper. A view hidden this long (another
// view shown, or the browser tab in the background) closes it; showing the view again reconnects
// (the tmux session kept running, so the screen comes back as it was).
const HIDDEN_CLOSE_MS = 60000

function el (tag, props = {}, children = []) {
  const node = document.createElement(tag)
  for (const [key, value] of Object.entries(props)) {
    if (key === 'text') node.textContent = value
    else if (key === 'className') node.className = value
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value)
    else node.setAttribute(key, value)
  }
  for (const child of children) node.append(child)
  return node
}

function loadStyles (root) {
  for (const href of ['static/vendor/xterm/css/xterm.css', 'static/preview/terminal.css']) {
    const url = new URL(href, root).href
    if ([...document.styleSheets].some(s => s.href === url) || document.querySelector(`link[data-term="${href}"]`)) continue
    document.head.append(el('link', { rel: 'stylesheet', href: url, 'data-term': href }))
  }
}

/**
 * Mounts the terminal into `container`. `config`: { chatId, token } (token null in open mode),
 * `opts.standalone` sets the document title and hides the "open in a window" link.
 * Returns { dispose(), visible(on) } — `visible(true)` fits and focuses after a layout change.
 */
export function mountTerminal (container, config, opts = {}) {
  // The server's root: the page's parent, or given absolute (the app inside a chat host's frame).
  const root = config.base ?? new URL('../', window.location.href).href
  loadStyles(root)
  const base = new URL(`terminal/${encodeURIComponent(config.chatId)}/`, root)
  const auth = config.token ? { Authorization: `Bearer ${config.token}` } : {}
  const state = { conn: null, retry: 0, timer: null, procTimer: null, parkTimer: null, parked: false, disposed: false, visible: true }

  const status = el('span', { className: 'term-state', text: 'Connecting…' })
  const procs = el('span', { className: 'term-procs' })
  const bar = el('div', { className: 'term-bar' }, [
    status,
    el('span', { className: 'term-hint', text: 'Shift+drag selects · Ctrl+Shift+C copies · Ctrl+Shift+V pastes' }),
    el('span', { className: 'grow' }),
    procs,
    el('button', { type: 'button', text: 'Copy', title: 'Copy the selection', onclick: () => copySelection() }),
    el('button', { type: 'button', text: 'Paste', title: 'Paste from the clipboard', onclick: () => pasteClipboard() })
  ])
  if (!opts.standalone) {
    const href = new URL(`terminal/${encodeURIComponent(config.chatId)}`, root)
    if (config.token) href.searchParams.set('t', config.token)
    bar.append(el('a', { href: href.href, target: '_blank', rel: 'noopener noreferrer', text: 'Open in window', title: 'Full-window terminal' }))
  }
  const screen = el('div', { className: 'term-screen' })
  const overlay = el('div', { className: 'term-overlay', hidden: '' })
  const body = el('div', { className: 'term-body' }, [screen, overlay])
  const view = el('div', { className: 'term-view', 'data-state': 'connecting' }, [bar, body])
  container.replaceChildren(view)

  const term = new Terminal({
    theme: THEME,
    cursorBlink: true,
    scrollback: 5000,
    allowProposedApi: false,
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace',
    fontSize: 13
  })
  const fit = new FitAddon()
  term.loadAddon(fit)
  term.open(screen)
  term.attachCustomKeyEventHandler(event => {
    if (event.type !== 'keydown') return true
    const key = event.key.toLowerCase()
    if (event.ctrlKey && event.shiftKey && key === 'c') { event.preventDefault(); copySelection(); return false }
    // Let the browser paste (Ctrl+Shift+V, Shift+Insert): xterm receives it as a paste event.
    if ((event.ctrlKey && event.shiftKey && key === 'v') || (event.shiftKey && key === 'insert')) return false
    return true
  })
  const refit = () => { if (state.visible && screen.clientWidth > 0) { try { fit.fit() } catch {} } }
  const observer = new ResizeObserver(() => requestAnimationFrame(refit))
  observer.observe(screen)

  function setState (name, text) {
    view.dataset.state = name
    status.textContent = text
  }

  function showOverlay (title, text, actions = []) {
    overlay.hidden = false
    overlay.replaceChildren(el('h3', { text: title }), el('p', { text }), el('div', { className: 'row' }, actions))
  }
  const hideOverlay = () => { overlay.hidden = true; overlay.replaceChildren() }
  const button = (text, onclick, primary = false) => el('button', { type: 'button', text, className: primary ? 'primary' : '', onclick })

  async function call (path, method = 'GET', body) {
    const headers = { ...auth }
    if (body !== undefined) headers['Content-Type'] = 'application/json'
    const res = await fetch(new URL(path, base), { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store', credentials: 'omit' })
    const json = await res.json().catch(() => ({}))
    return { ok: res.ok, status: res.status, json }
  }

  async function action (path, body) {
    setState('connecting', 'Starting…')
    showOverlay('Starting…', 'This takes a few seconds.')
    const res = await call(path, 'POST', body).catch(() => ({ ok: false, status: 0, json: {} }))
    if (!res.ok) {
      const why = { capacity_reached: 'The server runs as many sandboxes as it may; try again in a while.', image_missing: 'The sandbox image is missing on the server.', docker_unavailable: 'Docker is not reachable right now.' }[res.json.error]
      setState('stopped', 'Could not start')
      showOverlay('The sandbox did not start', why ?? `The server answered ${res.status}.`, [button('Try again', () => { void start() })])
      return
    }
    void start()
  }

  async function start () {
    if (state.disposed || state.parked) return
    clearTimeout(state.timer)
    setState('connecting', 'Connecting…')
    let res
    try { res = await call('status') } catch { return retry() }
    if (state.parked) return
    if (res.status === 401 || res.status === 403) {
      setState('denied', 'No access')
      showOverlay('No access to this terminal', 'This link has expired or does not allow the terminal. Ask the assistant for a fresh link.')
      return
    }
    if (!res.ok) return retry()
    const s = res.json
    if (s.running) return open()
    if (s.container_stopped) {
      setState('stopped', 'Sandbox stopped')
      showOverlay('The sandbox is stopped', 'Your files are kept; programs that were running in it have ended. Start it?', [button('Start it', () => action('restart-container'), true)])
    } else if (s.meta_exists) {
      setState('stopped', 'Sandbox removed')
      showOverlay('The sandbox was removed', 'Its files in /home/assistant and the outputs are kept. Recreate it?', [button('Recreate it', () => action('resurrect-container'), true)])
    } else {
      setState('stopped', 'No sandbox yet')
      showOverlay('No sandbox yet', 'This chat\'s computer starts the first time the assistant uses it.', [button('Check again', () => { void start() })])
      state.timer = setTimeout(() => { void start() }, 10000)
    }
  }

  function open () {
    refit()
    const url = new URL('ws', base)
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:'
    if (config.token) url.searchParams.set('t', config.token)
    state.conn = connectTerminal(url.href, term, {
      onOpen: () => {
        state.retry = 0
        hideOverlay()
        setState('open', 'Connected')
        if (state.visible) term.focus()
        pollProcesses()
      },
      onTitle: title => { if (opts.standalone) document.title = `${title} · Terminal` },
      onClose: closed
    })
  }

  function closed ({ code, reason, opened }) {
    state.conn = null
    clearTimeout(state.procTimer)
    if (state.disposed || state.parked) return
    if (code === 1000 && reason === 'session ended') {
      setState('stopped', 'Session ended')
      showOverlay('The terminal session ended', 'Its shell exited. A new session starts in /home/assistant.', [button('Start a new session', () => action('start-ttyd', { dangerous_mode: false }), true)])
    } else if (code === 1000 && reason === 'detached') {
      setState('stopped', 'Detached')
      showOverlay('Detached', 'This view was detached from the session, which is still running.', [button('Reattach', () => { void start() }, true)])
    } else if (code === 1001 && reason === 'sandbox stopped') {
      void start()
    } else if (code === 1008 || code === 1009) {
      setState('stopped', 'Closed')
      showOverlay('The terminal was closed', reason || 'The server refused a message.', [button('Reconnect', () => { void start() }, true)])
    } else {
      retry(opened)
    }
  }

  function retry (wasOpen = false) {
    if (state.disposed) return
    if (wasOpen) state.retry = 0
    const delay = Math.min(30000, 1000 * 2 ** state.retry) * (0.75 + Math.random() * 0.5)
    state.retry = Math.min(state.retry + 1, 5)
    setState('retrying', `Reconnecting in ${Math.round(delay / 1000)} s…`)
    state.timer = setTimeout(() => { void start() }, delay)
  }

  async function pollProcesses () {
    clearTimeout(state.procTimer)
    if (state.disposed || state.conn === null) return
    if (state.visible && !document.hidden) {
      const res = await call('processes').catch(() => null)
      renderProcesses(res?.ok ? res.json.processes ?? [] : [])
    }
    state.procTimer = setTimeout(pollProcesses, PROCESS_POLL_MS)
  }

  function renderProcesses (list) {
    if (list.length === 0) { procs.replaceChildren(); return }
    const menu = el('ul', { hidden: '' }, list.map(p => el('li', {}, [
      el('code', { text: p.command, title: p.command }),
      el('span', { text: `${p.elapsed_minutes} min` }),
      button('Stop', async () => {
        if (!window.confirm(`Stop process ${p.pid}?\n${p.command}`)) return
        await call(`processes/${encodeURIComponent(p.pid)}/kill`, 'POST').catch(() => {})
        void pollProcesses()
      })
    ])))
    procs.replaceChildren(button(`Agent processes (${list.length})`, () => { menu.hidden = !menu.hidden }), menu)
  }

  async function copySelection () {
    const text = term.getSelection()
    if (text === '') return
    try { await navigator.clipboard.writeText(text) } catch {
      const area = el('textarea', { 'aria-hidden': 'true' })
      area.style.position = 'fixed'
      area.style.opacity = '0'
      area.value = text
      document.body.append(area)
      area.select()
      document.execCommand('copy')
      area.remove()
    }
    term.focus()
  }

  async function pasteClipboard () {
    try { term.paste(await navigator.clipboard.readText()) } catch { setState(view.dataset.state, 'Paste with Ctrl+Shift+V') }
    term.focus()
  }

  const shown = () => state.visible && !document.hidden
  /** Hidden: close the socket after HIDDEN_CLOSE_MS; shown: cancel that, or reconnect if it happened. */
  function followVisibility () {
    if (state.disposed) return
    if (!shown()) {
      if (state.parkTimer === null && !state.parked) state.parkTimer = setTimeout(park, HIDDEN_CLOSE_MS)
      return
    }
    clearTimeout(state.parkTimer)
    state.parkTimer = null
    if (!state.parked) return
    state.parked = false
    void start()
  }
  function park () {
    state.parkTimer = null
    if (shown() || state.disposed) return
    state.parked = true
    clearTimeout(state.timer)
    clearTimeout(state.procTimer)
    setState('parked', 'Paused while hidden')
    state.conn?.close()
  }
  const onVisibility = () => followVisibility()
  document.addEventListener('visibilitychange', onVisibility)

  void start()
  return {
    visible (on) {
      state.visible = on
      followVisibility()
      if (on) { refit(); term.focus(); void pollProcesses() }
    },
    dispose () {
      state.disposed = true
      document.removeEventListener('visibilitychange', onVisibility)
      clearTimeout(state.parkTimer)
      clearTimeout(state.timer)
      clearTimeout(state.procTimer)
      observer.disconnect()
      state.conn?.close()
      term.dispose()
    },
    /** For tests and scripting: the terminal object. */
    term
  }
}
