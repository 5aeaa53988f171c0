/* global marked, hljs, Papa, readXlsxFile, mammoth */
// The preview's parser worker: the only place agent-written documents are parsed. It is started by parse.js
// from a blob bootstrap that importScripts() the one vendored library its kind needs, then this file. It
// holds no token, no page config and no DOM; it receives bytes and answers plain data: rows of strings, a tree
// of class names and strings, or HTML in slices (which the page sanitises with DOMPurify before insertion). Every output is bounded; the page
// terminates the worker when it runs past its time budget.

const MAX_ROWS = 2000
const MAX_COLS = 200
const MAX_CELL_CHARS = 10000
const MAX_SHEETS = 50
const CELL_BUDGET = 400000 // cells over all sheets of a workbook
const AUTO_DETECT_CHARS = 100000
const HTML_LIMIT = { markdown: 8 * 1048576, code: 16 * 1048576, docx: 40 * 1048576 }
// Declared uncompressed size of a ZIP-based Office file (checked before any library inflates it).
const INFLATED_LIMIT = { xlsx: 100 * 1048576, docx: 200 * 1048576 }

const mib = bytes => `${Math.round(bytes / 1048576)} MB`
const decode = bytes => new TextDecoder('utf-8').decode(bytes)

function boundedHtml (html, kind) {
  if (typeof html !== 'string') throw new Error('the parser produced no HTML')
  if (html.length > HTML_LIMIT[kind]) throw new Error(`the rendered document is larger than ${mib(HTML_LIMIT[kind])}`)
  return html
}

const CHUNK_CHARS = 64 * 1024
const VOID_ELEMENTS = new Set(['area', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track', 'wbr'])

function boundedChunks (chunks, kind) {
  const total = chunks.reduce((sum, chunk) => sum + chunk.length, 0)
  if (total > HTML_LIMIT[kind]) throw new Error(`the rendered document is larger than ${mib(HTML_LIMIT[kind])}`)
  return chunks
}

/**
 * mammoth's HTML (well-formed, escaped text) cut at top-level element boundaries into slices of about
 * CHUNK_CHARS, in one linear pass. A misjudged boundary only splits an element across two slices, which the
 * page sanitises separately: a cosmetic fault, never a way around the sanitiser.
 */
function splitTopLevel (html) {
  const chunks = []
  let depth = 0
  let start = 0
  let at = 0
  for (;;) {
    const lt = html.indexOf('<', at)
    const gt = lt === -1 ? -1 : html.indexOf('>', lt)
    if (gt === -1) break
    const closing = html[lt + 1] === '/'
    const name = /^[a-z][a-z0-9]*/i.exec(html.slice(lt + (closing ? 2 : 1), lt + 16))?.[0].toLowerCase()
    if (closing) depth = Math.max(0, depth - 1)
    else if (name !== undefined && !VOID_ELEMENTS.has(name) && html[gt - 1] !== '/') depth++
    at = gt + 1
    if (depth === 0 && at - start >= CHUNK_CHARS) { chunks.push(html.slice(start, at)); start = at }
  }
  if (start < html.length) chunks.push(html.slice(start))
  return chunks
}

/** Sum of the uncompressed sizes in a ZIP's central directory; Infinity for ZIP64 (beyond any budget here). */
function inflatedSize (bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const lowest = Math.max(0, bytes.length - 22 - 65535)
  for (let eocd = bytes.length - 22; eocd >= lowest; eocd--) {
    if (view.getUint32(eocd, true) !== 0x06054b50) continue
    const count = view.getUint16(eocd + 10, true)
    let offset = view.getUint32(eocd + 16, true)
    if (count === 0xffff || offset === 0xffffffff) return Infinity
    let total = 0
    for (let n = 0; n < count; n++) {
      if (offset + 46 > bytes.length || view.getUint32(offset, true) !== 0x02014b50) throw new Error('the file is damaged (bad ZIP directory)')
      const size = view.getUint32(offset + 24, true)
      if (size === 0xffffffff) return Infinity
      total += size
      offset += 46 + view.getUint16(offset + 28, true) + view.getUint16(offset + 30, true) + view.getUint16(offset + 32, true)
    }
    return total
  }
  throw new Error('the file is not a ZIP-based Office document')
}

function checkInflated (bytes, kind) {
  const size = inflatedSize(bytes)
  if (size > INFLATED_LIMIT[kind]) throw new Error(`it unpacks to more than ${mib(INFLATED_LIMIT[kind])}`)
}

const ENTITIES = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#x27;': "'", '&#39;': "'" }
const unescapeHtml = text => text.includes('&') ? text.replace(/&(?:amp|lt|gt|quot|#x27|#39);/g, e => ENTITIES[e]) : text

/**
 * highlight.js output (`<span class="…">`, `</span>` and escaped text, nothing else) as a tree of plain data:
 * a node is `[className, ...children]`, a child a string or a node. The page builds it with text nodes, so no
 * highlighter markup is ever parsed as HTML there. One linear pass.
 */
function spanTree (html) {
  const root = ['']
  const stack = [root]
  let at = 0
  while (at < html.length) {
    const lt = html.indexOf('<', at)
    const end = lt === -1 ? html.length : lt
    if (end > at) stack[stack.length - 1].push(unescapeHtml(html.slice(at, end)))
    if (lt === -1) break
    if (html.startsWith('</span>', lt)) {
      if (stack.length > 1) stack.pop()
      at = lt + 7
    } else if (html.startsWith('<span class="', lt) && html.indexOf('">', lt) !== -1) {
      const close = html.indexOf('">', lt)
      const node = [html.slice(lt + 13, close)]
      stack[stack.length - 1].push(node)
      stack.push(node)
      at = close + 2
    } else {
      throw new Error('unexpected highlighter output')
    }
  }
  return root
}

const clip = text => text.length > MAX_CELL_CHARS ? `${text.slice(0, MAX_CELL_CHARS)}…` : text

function cellText (value) {
  if (value === null || value === undefined) return ''
  if (typeof value === 'string') return clip(value)
  if (typeof value === 'number') return Number.isInteger(value) ? String(value) : String(Number(value.toPrecision(15)))
  if (typeof value === 'boolean') return value ? 'TRUE' : 'FALSE'
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) return ''
    const iso = value.toISOString()
    return iso.endsWith('T00:00:00.000Z') ? iso.slice(0, 10) : iso.slice(0, 19).replace('T', ' ')
  }
  return clip(String(value))
}

/** At most MAX_ROWS + 1 rows (header + body) of at most MAX_COLS cells, all strings. */
function boundedRows (rows, budget) {
  const out = []
  for (const row of rows) {
    if (out.length > MAX_ROWS || budget.cells <= 0) break
    const cells = Array.isArray(row) ? row.slice(0, MAX_COLS).map(cellText) : []
    budget.cells -= Math.max(1, cells.length)
    out.push(cells)
  }
  return { rows: out, truncated: out.length < rows.length }
}

const PARSERS = {
  markdown ({ bytes }) {
    // Parsed block by block so the page can sanitise and insert the result in slices (it stays responsive).
    const tokens = marked.lexer(decode(bytes), { gfm: true })
    const chunks = []
    let group = []
    let size = 0
    const flush = () => {
      if (group.length > 0) chunks.push(marked.parser(group, { gfm: true }))
      group = []
      size = 0
    }
    for (const token of tokens) {
      group.push(token)
      size += typeof token.raw === 'string' ? token.raw.length : 0
      if (size >= CHUNK_CHARS) flush()
    }
    flush()
    return { chunks: boundedChunks(chunks, 'markdown') }
  },
  code ({ bytes, options }) {
    const text = decode(bytes)
    const language = typeof options.language === 'string' ? options.language : ''
    if (language !== '' && hljs.getLanguage(language) !== undefined) {
      return { tree: spanTree(boundedHtml(hljs.highlight(text, { language, ignoreIllegals: true }).value, 'code')), language }
    }
    if (text.length > AUTO_DETECT_CHARS) return { text }
    const auto = hljs.highlightAuto(text)
    return { tree: spanTree(boundedHtml(auto.value, 'code')), language: auto.language ?? '' }
  },
  csv ({ bytes, options }) {
    const delimiter = options.delimiter === '\t' ? '\t' : ''
    const parsed = Papa.parse(decode(bytes), { skipEmptyLines: true, delimiter, preview: MAX_ROWS + 1 })
    const table = boundedRows(parsed.data, { cells: CELL_BUDGET })
    return { rows: table.rows, truncated: table.truncated || parsed.meta.truncated === true }
  },
  async xlsx ({ bytes }) {
    checkInflated(bytes, 'xlsx')
    const sheets = await readXlsxFile(bytes.buffer)
    const budget = { cells: CELL_BUDGET }
    return {
      sheets: sheets.slice(0, MAX_SHEETS).map(({ sheet, data }) => {
        const name = clip(String(sheet))
        if (budget.cells <= 0) return { name, rows: [], truncated: false, omitted: true }
        return { name, ...boundedRows(Array.isArray(data) ? data : [], budget), omitted: false }
      }),
      moreSheets: sheets.length > MAX_SHEETS
    }
  },
  async docx ({ bytes }) {
    checkInflated(bytes, 'docx')
    const result = await mammoth.convertToHtml({ arrayBuffer: bytes.buffer })
    return { chunks: boundedChunks(splitTopLevel(boundedHtml(result.value, 'docx')), 'docx') }
  }
}

function messageOf (err) {
  const text = err !== null && typeof err === 'object' && typeof err.message === 'string' ? err.message : String(err)
  return text.slice(0, 300)
}

self.onmessage = async event => {
  self.onmessage = null // one document per worker
  const { kind, options, bytes } = event.data ?? {}
  try {
    if (!Object.hasOwn(PARSERS, kind) || !(bytes instanceof ArrayBuffer)) throw new Error('bad parse request')
    const result = await PARSERS[kind]({ bytes: new Uint8Array(bytes), options: options ?? {} })
    self.postMessage({ ok: true, result })
  } catch (err) {
    self.postMessage({ ok: false, error: messageOf(err) })
  }
}
