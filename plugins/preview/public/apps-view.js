// Apps view (docs/features.md#app-preview-urls): the ports listening in the chat's sandbox, refreshed while the
// view is shown and the tab visible, each opened in this frame or a new tab through its app URL (the
// listing's links carry the page's control token, which the server turns into the app's cookie and takes
// out of the address). An app is never framed inside this page: it is served from this page's origin, so
// from a frame it could read the page and its token; opened here it replaces the page (Back returns).
// Inside another site's frame (a chat UI) only the new tab is offered: browsers keep the app's cookie
// out of third-party frames.
import { el, pollWhileShown } from './dom.js'

const POLL_MS = 3000
const MAX_APPS = 100

/** Mounts the view into `container`; `config.apps.list` is the listing route of the chat (control token included). */
export function mountAppsView (container, config) {
  let framed = true
  try { framed = window.top !== window.self } catch {}
  const state = { busy: false }
  const rows = el('ul', { className: 'apps-list', id: 'apps-list' })
  const empty = el('p', { className: 'apps-empty', text: 'No app is listening. A server the model starts in the sandbox (port 1024–65535, on 0.0.0.0 or 127.0.0.1) appears here.' })
  const status = el('p', { className: 'net-status', role: 'status' })
  container.replaceChildren(el('div', { className: 'net' }, [
    el('div', { className: 'net-head' }, [el('div', {}, [el('h2', { text: 'Apps' }), el('p', { className: 'net-policy', text: 'Web apps running in this chat\'s sandbox.' })])]),
    status, rows, empty
  ]))

  function row (app) {
    const port = Number(app.port)
    const url = String(app.url ?? '')
    // Only this server's own app URLs are followed (the listing is ours, but the page trusts no string blindly).
    const own = url.startsWith(`${window.location.origin}/`) || url.startsWith('/')
    const tab = el('a', { className: framed ? 'button primary' : 'button', href: own ? url : '#', target: '_blank', rel: 'noopener noreferrer', text: 'New tab' })
    const here = framed ? [] : [el('a', { className: 'button primary', href: own ? url : '#', target: '_self', dataset: { port: String(port) }, text: 'Open here' })]
    return el('li', { className: 'apps-row' }, [
      el('span', { className: 'apps-port', text: `:${port}` }),
      el('code', { className: 'apps-url', text: own ? new URL(url, window.location.href).pathname : '' }),
      el('span', { className: 'apps-actions' }, [...here, tab])
    ])
  }

  async function refresh () {
    if (state.busy) return
    state.busy = true
    try {
      const res = await fetch(config.apps.list, { cache: 'no-store', credentials: 'omit' })
      if (res.status === 401 || res.status === 403) throw new Error('This link has expired or is not valid.')
      if (!res.ok) throw new Error(`The server answered HTTP ${res.status}.`)
      const body = await res.json()
      const apps = (Array.isArray(body.apps) ? body.apps : []).filter(a => Number.isInteger(a.port)).slice(0, MAX_APPS)
      rows.replaceChildren(...apps.map(row))
      empty.hidden = apps.length > 0
      status.textContent = ''
    } catch (err) {
      status.textContent = err instanceof TypeError ? 'Connection lost. Retrying…' : err.message
    } finally { state.busy = false }
  }

  return pollWhileShown(refresh, POLL_MS)
}
