// Network view (docs/contract.md#egress): the chat's egress policy and its recent connections through the egress
// proxy (time, host, port, decision and reason, bytes), newest first, refreshed while the view is
// shown and the tab visible. Both routes are read with the page's files token (read-only); every
// remote string reaches the DOM through textContent (el()), and at most MAX_ROWS rows are drawn.
import { el, pollWhileShown } from './dom.js'
import { formatSize } from './app.js'

const POLL_MS = 3000
const MAX_ROWS = 500
const FILTERS = [['all', 'All'], ['allowed', 'Allowed'], ['refused', 'Refused']]
const SOURCES = { chat: 'set for this chat', user: 'default of this chat\'s user', server: 'server setting' }
const MODES = { open: 'open — public internet', allowlist: 'allowlist only', off: 'off — no network' }

const clip = (value, max) => String(value ?? '').slice(0, max)
const BLOCKED = 'blocked by the sandbox egress policy: '

function timeCell (iso) {
  const at = new Date(clip(iso, 40))
  const valid = !Number.isNaN(at.getTime())
  return el('td', { className: 'net-time' }, [
    el('time', { datetime: valid ? at.toISOString() : '', title: valid ? at.toLocaleString() : '', text: valid ? at.toLocaleTimeString() : '?' })
  ])
}

function row (c) {
  const decision = ['allowed', 'denied', 'failed'].includes(c.decision) ? c.decision : 'failed'
  const host = clip(c.host, 255)
  const target = host.includes(':') ? `[${host}]:${Number(c.port) || 0}` : `${host}:${Number(c.port) || 0}`
  const full = decision === 'allowed' ? (c.rule === undefined ? clip(c.reason, 40) : `rule ${clip(c.rule, 300)}`) : clip(c.message ?? c.reason, 300)
  // The refusal as the sandbox's client saw it is the tooltip; the cell drops the common prefix.
  const why = full.startsWith(BLOCKED) ? full.slice(BLOCKED.length) : full
  return el('tr', { className: `net-row ${decision}`, dataset: { decision, host } }, [
    timeCell(c.time),
    el('td', { className: 'net-host', title: c.address === undefined ? target : `${target} → ${clip(c.address, 64)}`, text: target }),
    el('td', { className: 'net-method', text: clip(c.method, 16) }),
    el('td', {}, [el('span', { className: `net-decision ${decision}`, text: decision })]),
    el('td', { className: 'net-reason', title: full, text: why }),
    el('td', { className: 'net-bytes', text: decision === 'allowed' ? `↑ ${formatSize(Number(c.bytesUp) || 0)} ↓ ${formatSize(Number(c.bytesDown) || 0)}` : '—' })
  ])
}

/** Mounts the view into `container`; `config.egress` holds the two URLs (files token included). */
export function mountNetworkView (container, config) {
  const state = { filter: 'all', connections: [], busy: false }
  const policy = el('p', { className: 'net-policy', text: 'Loading the egress policy…' })
  const count = el('span', { className: 'net-count' })
  const filters = el('div', { className: 'net-filters', role: 'group', 'aria-label': 'Show' }, FILTERS.map(([key, label]) => {
    const b = el('button', { type: 'button', className: 'button', dataset: { filter: key }, 'aria-pressed': String(key === 'all'), text: label })
    b.addEventListener('click', () => { state.filter = key; draw() })
    return b
  }))
  const body = el('tbody', { id: 'net-rows' })
  const empty = el('p', { className: 'net-empty', text: 'No connections yet. Requests the sandbox makes through the egress proxy appear here.' })
  const status = el('p', { className: 'net-status', role: 'status' })
  container.replaceChildren(el('div', { className: 'net' }, [
    el('div', { className: 'net-head' }, [el('div', {}, [el('h2', { text: 'Network' }), policy]), el('div', { className: 'net-tools' }, [count, filters])]),
    status,
    el('div', { className: 'net-scroll' }, [el('table', { className: 'net-table' }, [
      el('thead', {}, [el('tr', {}, ['Time', 'Host', 'Kind', 'Decision', 'Reason', 'Bytes'].map(h => el('th', { scope: 'col', text: h })))]),
      body
    ])]),
    empty
  ]))

  function draw () {
    for (const b of filters.children) b.setAttribute('aria-pressed', String(b.dataset.filter === state.filter))
    const shown = state.connections.filter(c => state.filter === 'all' || (state.filter === 'allowed' ? c.decision === 'allowed' : c.decision !== 'allowed'))
    const refused = state.connections.filter(c => c.decision !== 'allowed').length
    count.textContent = `${state.connections.length} connection${state.connections.length === 1 ? '' : 's'} · ${refused} refused`
    body.replaceChildren(...shown.slice(0, MAX_ROWS).map(row))
    empty.hidden = shown.length > 0
  }

  async function load (url) {
    const res = await fetch(url, { cache: 'no-store', credentials: 'omit' })
    if (res.status === 401 || res.status === 403) throw new Error('This link has expired or is not valid.')
    if (res.status === 404) throw new Error('The egress proxy is not enabled on this server.')
    if (!res.ok) throw new Error(`The server answered HTTP ${res.status}.`)
    return await res.json()
  }

  async function refresh () {
    if (state.busy) return
    state.busy = true
    try {
      const [p, log] = await Promise.all([load(config.egress.policy), load(config.egress.log)])
      const rules = Array.isArray(p.allow) ? p.allow.length : 0
      policy.textContent = `Egress: ${MODES[p.mode] ?? clip(p.mode, 20)} (${SOURCES[p.source] ?? 'server setting'}) · ${rules} allow rule${rules === 1 ? '' : 's'}`
      policy.title = Array.isArray(p.allow) ? p.allow.slice(0, 256).map(r => clip(r, 300)).join('\n') : ''
      state.connections = (Array.isArray(log.connections) ? log.connections : []).slice(-MAX_ROWS).reverse()
      status.textContent = ''
      draw()
    } catch (err) {
      status.textContent = err instanceof TypeError ? 'Connection lost. Retrying…' : err.message
    } finally { state.busy = false }
  }

  return pollWhileShown(refresh, POLL_MS)
}
