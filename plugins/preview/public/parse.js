// Page side of the parser worker. Every parser of agent-written documents runs in a dedicated worker that
// holds no token, no config and no DOM: the page fetches the bytes, transfers them, and gets plain data back
// (rows, an HTML string that the page still sanitises). One fresh worker per document, terminated when it
// answers, when its time budget runs out (a runaway or ReDoS-ed parser), or when another file is selected.

const VENDOR = new URL('../vendor/', import.meta.url)
const WORKER_CODE = new URL('./parser-worker.js', import.meta.url).href

/** The vendored libraries each kind of parser loads (static paths only: never anything below /files). */
const LIBRARIES = {
  markdown: ['marked/lib/marked.umd.js'],
  code: ['highlight/highlight.min.js'],
  csv: ['papaparse/papaparse.min.js'],
  xlsx: ['read-excel-file/bundle/read-excel-file.min.js'],
  docx: ['mammoth/mammoth.browser.min.js']
}

export class ParseError extends Error {
  /** `reason`: 'timeout' (terminated), 'failed' (the parser threw or crashed) or 'aborted' (another file won). */
  constructor (reason, message) {
    super(message)
    this.name = 'ParseError'
    this.reason = reason
  }
}

const bootstraps = new Map()
/**
 * A blob bootstrap per kind that loads the library and parser-worker.js with importScripts. A blob because
 * a page in an opaque-origin iframe (Open WebUI) cannot start a worker from a URL; the CSP allows workers
 * from blob: only, and the blob holds nothing but these static URLs.
 */
function bootstrapUrl (kind) {
  if (!bootstraps.has(kind)) {
    const urls = [...LIBRARIES[kind].map(path => new URL(path, VENDOR).href), WORKER_CODE]
    const code = `importScripts(${urls.map(u => JSON.stringify(u)).join(', ')})\n`
    bootstraps.set(kind, URL.createObjectURL(new Blob([code], { type: 'text/javascript' })))
  }
  return bootstraps.get(kind)
}

/**
 * Parses `bytes` (an ArrayBuffer, transferred: the page loses it) as `kind` in a fresh worker.
 * Resolves with the worker's plain-data result; rejects with a ParseError.
 */
export function parseInWorker (kind, bytes, { timeoutMs, signal, options = {} }) {
  if (!Object.hasOwn(LIBRARIES, kind)) return Promise.reject(new ParseError('failed', `no parser for ${kind}`))
  return new Promise((resolve, reject) => {
    const worker = new Worker(bootstrapUrl(kind), { name: `preview-parser-${kind}` })
    const finish = (settle, value) => {
      clearTimeout(timer)
      worker.terminate()
      signal?.removeEventListener('abort', onAbort)
      settle(value)
    }
    const onAbort = () => finish(reject, new ParseError('aborted', 'cancelled'))
    const timer = setTimeout(() => finish(reject, new ParseError('timeout', `took longer than ${Math.round(timeoutMs / 100) / 10} s`)), timeoutMs)
    worker.onmessage = event => {
      const answer = event.data
      if (answer !== null && typeof answer === 'object' && answer.ok === true) finish(resolve, answer.result)
      else finish(reject, new ParseError('failed', typeof answer?.error === 'string' ? answer.error.slice(0, 300) : 'the parser gave no answer'))
    }
    worker.onerror = event => {
      event.preventDefault()
      finish(reject, new ParseError('failed', 'the document parser stopped unexpectedly'))
    }
    worker.onmessageerror = () => finish(reject, new ParseError('failed', 'the parser answered with unreadable data'))
    if (signal?.aborted) { onAbort(); return }
    signal?.addEventListener('abort', onAbort, { once: true })
    worker.postMessage({ kind, options, bytes }, [bytes])
  })
}
