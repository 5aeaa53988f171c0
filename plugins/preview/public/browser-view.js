// Browser view of the preview app (full scope only): the chat's shared browser live, through the CDP
// bridge (docs/contract.md#browser). A screencast of the selected tab, its tabs and URL, and "Take over", which
// forwards mouse, wheel and keyboard to the page with coordinates scaled from the shown frame to the
// page's viewport. The viewer never changes the agent's page: no device-metrics override, no request
// interception, and the socket (which holds the sandbox awake) is open only while the view is shown.
import { connectPage } from './browser-cdp.js'

const POLL_VISIBLE_MS = 3000
const POLL_HIDDEN_MS = 15000
const $ = id => document.getElementById(id)

function el (tag, props = {}, children = []) {
  const node = document.createElement(tag)
  for (const [key, value] of Object.entries(props)) {
    if (key === 'text') node.textContent = value
    else if (key === 'className') node.className = value
    else node.setAttribute(key, value)
  }
  for (const child of children) node.append(child)
  return node
}

/** Builds the view's section beside the outputs layout (the switcher in the top bar is the page's). */
function buildDom () {
  const link = el('link', { rel: 'stylesheet', href: new URL('./browser-view.css', import.meta.url).href })
  document.head.append(link)
  const section = el('section', { className: 'browser-view', id: 'browser-view', hidden: '', 'data-view-pane': 'browser', 'data-state': 'idle', 'aria-label': 'Live browser' }, [
    // `browser handoff` (docs/contract.md#browser-handoff): the assistant's reason, and a way to hand back.
    el('div', { className: 'browser-handoff', id: 'browser-handoff', hidden: '', role: 'status' }, [
      el('span', { id: 'browser-handoff-why' }),
      el('button', { type: 'button', className: 'button', id: 'browser-handoff-done', text: 'Done, hand back' })
    ]),
    el('div', { className: 'browser-bar' }, [
      el('div', { className: 'browser-tabs', id: 'browser-tabs', role: 'tablist', 'aria-label': 'Browser tabs' }),
      el('div', { className: 'browser-url', id: 'browser-url', title: 'Address of the shown tab' }),
      el('span', { className: 'browser-state', id: 'browser-state' }),
      el('button', { type: 'button', className: 'button primary', id: 'browser-takeover', disabled: '', text: 'Take over' })
    ]),
    el('div', { className: 'browser-stage', id: 'browser-stage' }, [
      el('img', { className: 'browser-screen', id: 'browser-screen', alt: 'Live view of the browser', tabindex: '0', draggable: 'false', 'data-frames': '0' }),
      el('div', { className: 'browser-empty', id: 'browser-empty' }, [
        el('h2', { text: 'The browser is not running' }),
        el('p', { text: 'It starts when the assistant opens a page. This view connects on its own.' })
      ])
    ]),
    el('p', { className: 'browser-hint', id: 'browser-hint', hidden: '', text: 'You control the browser: mouse, wheel and keyboard go to the page. Click Release to hand it back.' })
  ])
  document.querySelector('main.layout').after(section)
}

export function mountBrowserView (config) {
  buildDom()
  const state = { active: false, pages: [], selected: null, page: null, timer: null, takeover: false, retry: 0, connections: 0, handoff: null }
  const base = new URL(`browser/${encodeURIComponent(config.chatId)}/`, config.base ?? new URL('../', window.location.href))
  const withToken = path => {
    const url = new URL(path, base)
    if (config.token) url.searchParams.set('t', config.token)
    return url
  }
  const shown = () => !document.hidden && !$('browser-view').hidden

  function setState (s, text) {
    $('browser-view').dataset.state = s
    $('browser-state').textContent = text
    $('browser-takeover').disabled = s !== 'live'
    $('browser-empty').hidden = s === 'live' || s === 'connecting'
    if (s !== 'live') setTakeover(false)
  }

  function renderTabs () {
    const box = $('browser-tabs')
    box.replaceChildren(...state.pages.map(p => {
      const b = el('button', { type: 'button', className: 'browser-tab', role: 'tab', title: p.url, 'data-id': p.id, 'aria-selected': String(p.id === state.selected), text: p.title || p.url || 'New tab' })
      b.addEventListener('click', () => { if (state.selected !== p.id) { state.selected = p.id; renderTabs(); reconnect() } })
      return b
    }))
    const current = state.pages.find(p => p.id === state.selected)
    if (current !== undefined && $('browser-url').dataset.live !== 'true') $('browser-url').textContent = current.url
    $('browser-dot')?.classList.toggle('on', state.active)
  }

  async function poll () {
    let body = null
    try {
      const res = await fetch(withToken('status'), { cache: 'no-store', credentials: 'omit' })
      if (res.ok) body = await res.json()
    } catch {}
    // A failed poll (slow server, network blip) never drops a live connection: its socket reports
    // its own end, and that drives reconnection.
    if (body !== null) {
      state.active = body.active === true
      state.pages = Array.isArray(body.pages) ? body.pages : []
      showHandoff(typeof body.handoff?.why === 'string' ? body.handoff.why : null)
    } else if (state.page === null) {
      state.active = false
      state.pages = []
    }
    if (!state.pages.some(p => p.id === state.selected) && (state.page === null || body !== null)) state.selected = state.pages[0]?.id ?? null
    renderTabs()
    if (!shown() || state.page !== null) return
    if (state.selected === null) { setState('idle', 'Not running'); return }
    connect()
  }

  function showHandoff (why) {
    state.handoff = why
    $('browser-handoff').hidden = why === null
    $('browser-handoff-why').textContent = why === null ? '' : `The assistant asks you to take over: ${why}. Click Take over, do it, then Release.`
  }

  /** Tells the server the browser is handed back, which ends the assistant's wait. */
  async function release () {
    showHandoff(null)
    try { await fetch(withToken('handoff/release'), { method: 'POST', cache: 'no-store', credentials: 'omit' }) } catch {}
    schedule(true)
  }

  function schedule (soon = false) {
    clearTimeout(state.timer)
    state.timer = setTimeout(async () => { await poll(); schedule() }, soon ? 0 : document.hidden ? POLL_HIDDEN_MS : POLL_VISIBLE_MS)
  }

  function disconnect () {
    setTakeover(false)
    if (state.page !== null) { state.page.close(); state.page = null }
  }

  function connect () {
    disconnect()
    const id = state.selected
    const ws = withToken(`devtools/page/${encodeURIComponent(id)}`)
    ws.protocol = ws.protocol === 'https:' ? 'wss:' : 'ws:'
    setState('connecting', 'Connecting…')
    $('browser-view').dataset.connections = String(++state.connections)
    const screen = $('browser-screen')
    const page = connectPage(ws.href, {
      screen,
      onLive: () => { state.retry = 0; setState('live', 'Live') },
      onUrl: url => { $('browser-url').textContent = url; $('browser-url').dataset.live = 'true' },
      onClose: () => {
        if (state.page !== page) return
        state.page = null
        $('browser-url').dataset.live = 'false'
        // The tab closed or the sandbox restarted: look again soon, then keep trying while shown.
        setState('connecting', 'Reconnecting…')
        state.retry = Math.min(state.retry + 1, 5)
        clearTimeout(state.timer)
        state.timer = setTimeout(async () => { await poll(); schedule() }, 500 * state.retry)
      }
    })
    page.id = id
    state.page = page
  }

  function reconnect () { if (shown()) connect() }

  function setTakeover (on) {
    state.takeover = on && state.page !== null
    $('browser-takeover').textContent = state.takeover ? 'Release' : 'Take over'
    $('browser-takeover').classList.toggle('active', state.takeover)
    $('browser-view').dataset.takeover = state.takeover ? 'on' : 'off'
    $('browser-hint').hidden = !state.takeover
    state.page?.setInput(state.takeover)
    if (state.takeover) $('browser-screen').focus()
  }

  $('browser-takeover').addEventListener('click', () => {
    const releasing = state.takeover
    setTakeover(!state.takeover)
    if (releasing && state.handoff !== null) void release()
  })
  $('browser-handoff-done').addEventListener('click', () => { setTakeover(false); void release() })
  document.addEventListener('visibilitychange', () => {
    // Hidden: no screencast, no input, no socket (an open socket keeps the sandbox from idling out).
    if (document.hidden) disconnect()
    schedule(!document.hidden)
  })
  window.addEventListener('pagehide', disconnect)
  setState('idle', 'Not running')
  schedule(true)
  return {
    /** Called by app.js's view switcher after it showed or hid the section. */
    visible (on) {
      if (on) schedule(true)
      else disconnect()
    }
  }
}
