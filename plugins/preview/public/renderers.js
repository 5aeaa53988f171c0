// One renderer module per listing `type` (render/*.js). Those that parse agent-written content do it in the
// parser worker (parse.js, parser-worker.js); the page only fetches bytes, sanitises HTML and builds DOM.
// Libraries are vendored from npm and served from /static/vendor; nothing comes from a third-party host.
import * as guard from './crash-guard.js'
import { NoPreviewError, el, notice } from './dom.js'
import { TooLargeError } from './fetch-file.js'
import { ParseError } from './parse.js'
import * as media from './render/media.js'
import code from './render/code.js'
import docx from './render/docx.js'
import markdown from './render/markdown.js'
import spreadsheet from './render/spreadsheet.js'
import text from './render/text.js'
import xlsx from './render/xlsx.js'

export { badgeFor } from './dom.js'

const TEXT_LIMIT = 2 * 1024 * 1024
const BINARY_LIMIT = 25 * 1024 * 1024

const RENDERERS = { ...media, markdown, code, text, spreadsheet, xlsx, docx }
const LIMITS = { markdown: TEXT_LIMIT, code: TEXT_LIMIT, text: TEXT_LIMIT, spreadsheet: TEXT_LIMIT, xlsx: BINARY_LIMIT, docx: BINARY_LIMIT }

let running = null

function failure (file, err, downloadHref, timeoutMs) {
  if (err instanceof TooLargeError) return notice(file, 'Too large to preview here', `${file.name} is ${err.message}.`, downloadHref)
  if (err instanceof NoPreviewError) return notice(file, 'No preview for this file', err.message, downloadHref)
  if (err instanceof ParseError && err.reason === 'timeout') {
    return notice(file, 'Preview stopped', `Reading ${file.name} took longer than ${Math.round(timeoutMs / 1000)} s, so it was stopped to keep this page responsive. The file may be very large or malformed; download it to open it on your computer.`, downloadHref)
  }
  const detail = err instanceof Error ? err.message : String(err)
  return notice(file, 'Could not show a preview', `${file.name}: ${detail}`, downloadHref)
}

function pausedNotice (file, target, options) {
  const retry = el('button', { type: 'button', className: 'button', text: 'Preview anyway' })
  retry.addEventListener('click', () => renderPreview(file, target, { ...options, force: true }))
  return notice(file, 'Preview paused', `The last attempt to preview ${file.name} did not finish: it may have stopped this page. You can download it, or try the preview again.`, options.downloadHref, [retry])
}

/**
 * Renders `file` into `target` unless another file was selected meanwhile (`stillCurrent`). A newer call
 * cancels the older one's fetch and parser worker. `guardKey` names the document for the crash guard;
 * `force` parses it even when an earlier attempt never finished.
 */
export async function renderPreview (file, target, options) {
  const { stillCurrent, downloadHref, parseTimeoutMs, guardKey, force = false } = options
  running?.abort()
  const controller = new AbortController()
  running = controller
  target.dataset.type = file.type
  target.setAttribute('aria-busy', 'true')
  target.replaceChildren(el('div', { className: 'loading', text: 'Loading preview…' }))
  const render = RENDERERS[file.type]
  const limit = LIMITS[file.type]
  let node
  try {
    if (render === undefined) {
      node = notice(file, 'No preview for this file type', `${file.name} (${file.mime}) can be downloaded and opened on your computer.`, downloadHref)
    } else if (limit !== undefined && file.size > limit) {
      node = failure(file, new TooLargeError(limit), downloadHref, parseTimeoutMs)
    } else if (limit !== undefined && !force && guard.unfinished(guardKey)) {
      node = pausedNotice(file, target, options)
    } else if (limit !== undefined) {
      guard.begin(guardKey)
      try { node = await render(file, { limit, signal: controller.signal, timeoutMs: parseTimeoutMs }) } finally { guard.end(guardKey) }
    } else {
      node = render(file)
    }
  } catch (err) {
    if (controller.signal.aborted) return
    node = failure(file, err, downloadHref, parseTimeoutMs)
  }
  if (running === controller) running = null
  if (!stillCurrent()) return
  target.removeAttribute('aria-busy')
  target.dataset.rendered = file.path
  target.replaceChildren(node)
}
