// DOMPurify in the page: the last gate between the parser worker's HTML and the DOM. Beyond the HTML profile
// it removes what lets a document reach outside its box: `style` attributes and `<style>` (position:fixed
// overlays, phishing over the toolbar), forms and buttons, popovers, and class names the app's own CSS uses
// (`.banner` is fixed-positioned). Ids and names are prefixed (`user-content-…`) so a document cannot
// shadow the app's elements. CSS containment on `.doc` and `#preview` (app.css) is the second layer.
import { el } from './dom.js'

const VENDOR = new URL('../vendor/', import.meta.url)
// Syntax classes only: highlight.js (`hljs-…`, scope modifiers like `function_`) and marked's `language-…`.
const SAFE_CLASS = /^(?:hljs(?:-[a-z0-9-]{1,40})?|[a-z]{1,20}_|language-[\w+#.-]{1,40})$/

/** The syntax class names in `value`, space-separated; every other class name is dropped. */
export const safeClasses = value => value.split(/\s+/).filter(name => SAFE_CLASS.test(name)).join(' ')

let loading = null
function loadPurify () {
  loading ??= new Promise((resolve, reject) => {
    const script = document.createElement('script')
    script.src = new URL('dompurify/dist/purify.min.js', VENDOR).href
    script.onload = () => {
      window.DOMPurify.addHook('uponSanitizeAttribute', (node, data) => {
        if (data.attrName !== 'class') return
        data.attrValue = safeClasses(data.attrValue)
        if (data.attrValue === '') data.keepAttr = false
      })
      resolve(window.DOMPurify)
    }
    script.onerror = () => { loading = null; reject(new Error('could not load the sanitiser')) }
    document.head.append(script)
  })
  return loading
}

const DOCUMENT = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'select', 'textarea', 'dialog', 'template'],
  FORBID_ATTR: ['style', 'popover', 'popovertarget', 'popovertargetaction', 'autofocus'],
  SANITIZE_NAMED_PROPS: true
}

/** Yields to the event loop (not throttled in hidden tabs, unlike setTimeout). */
const nextTask = () => new Promise(resolve => {
  const channel = new MessageChannel()
  channel.port1.onmessage = () => { channel.port1.close(); resolve() }
  channel.port2.postMessage(null)
})

/**
 * Sanitised document HTML → a contained box. `chunks` are slices of the document (top-level blocks), each
 * sanitised on its own with a yield in between, so a large document never blocks the page for long and a
 * newer selection (`signal`) stops the work. Relative links and images resolve against the file's URL.
 */
export async function documentBox (chunks, file, className, signal) {
  const DOMPurify = await loadPurify()
  const box = el('div', { className })
  for (let i = 0; i < chunks.length; i++) {
    if (i > 0) await nextTask()
    if (signal?.aborted) throw new DOMException('the preview was cancelled', 'AbortError')
    box.append(DOMPurify.sanitize(String(chunks[i]), { ...DOCUMENT, RETURN_DOM_FRAGMENT: true }))
  }
  resolveLinks(box, new URL(file.url, window.location.href))
  return box
}

function resolveLinks (box, base) {
  for (const node of box.querySelectorAll('[src], [href]')) {
    const attr = node.hasAttribute('src') ? 'src' : 'href'
    const value = node.getAttribute(attr)
    if (value.startsWith('data:')) continue
    if (value.startsWith('#')) {
      // SANITIZE_NAMED_PROPS renamed the targets; keep in-document links (footnotes, bookmarks) working.
      if (!value.startsWith('#user-content-')) node.setAttribute(attr, `#user-content-${value.slice(1)}`)
      continue
    }
    try { node.setAttribute(attr, new URL(value, base).href) } catch { node.removeAttribute(attr) }
    if (node.tagName === 'A') { node.setAttribute('target', '_blank'); node.setAttribute('rel', 'noopener noreferrer') }
  }
}
