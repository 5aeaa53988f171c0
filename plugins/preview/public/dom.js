// DOM helpers shared by the app and the renderers. Remote strings only ever become text nodes here.

export function el (tag, props = {}, children = []) {
  const node = document.createElement(tag)
  for (const [key, value] of Object.entries(props)) {
    if (key === 'text') node.textContent = value
    else if (key === 'className') node.className = value
    else if (key === 'dataset') Object.assign(node.dataset, value)
    else node.setAttribute(key, value)
  }
  for (const child of children) node.append(child)
  return node
}

export const extOf = name => {
  const lower = name.toLowerCase()
  if (lower === 'dockerfile') return 'dockerfile'
  const dot = lower.lastIndexOf('.')
  return dot <= 0 ? '' : lower.slice(dot + 1)
}

/** A file badge: the extension on a colour of its type class (no emoji font needed). */
export function badgeFor (file) {
  const ext = extOf(file.name).slice(0, 4).toUpperCase()
  return el('span', { className: `badge t-${file.type}`, 'aria-hidden': 'true', text: ext === '' ? '•' : ext })
}

/** A centred message with the file's badge and a download button: the answer whenever there is no preview. */
export function notice (file, title, detail, downloadHref, actions = []) {
  return el('div', { className: 'notice' }, [
    el('div', { className: 'notice-icon' }, [badgeFor(file)]),
    el('h2', { text: title }),
    el('p', { text: detail }),
    el('div', { className: 'notice-actions' }, [
      el('a', { className: 'button primary', href: downloadHref, download: file.name, text: `Download ${file.name}` }),
      ...actions
    ])
  ])
}

/** Thrown by a renderer that recognises a file it cannot show; its message is the notice's text. */
export class NoPreviewError extends Error {
  constructor (message) {
    super(message)
    this.name = 'NoPreviewError'
  }
}

/**
 * A view that polls while it is shown and the page is visible: `refresh` at once when it is shown (or
 * the page comes back), then `intervalMs` after the previous refresh ended; nothing while hidden.
 * Returns the view's handle: `visible(on)`.
 */
export function pollWhileShown (refresh, intervalMs) {
  const state = { visible: false, timer: null }
  const stop = () => { clearTimeout(state.timer); state.timer = null }
  function schedule () {
    stop()
    if (!state.visible || document.hidden) return
    state.timer = setTimeout(async () => { await refresh(); schedule() }, intervalMs)
  }
  document.addEventListener('visibilitychange', () => {
    if (!state.visible) return
    if (document.hidden) { stop(); return }
    refresh().then(schedule)
  })
  return {
    visible (on) {
      const was = state.visible
      state.visible = on
      if (on && !was) refresh().then(schedule)
      if (!on) stop()
    }
  }
}
