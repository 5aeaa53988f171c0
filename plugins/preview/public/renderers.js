// One renderer per listing `type`. Libraries are vendored from npm and loaded on first use from
// /static/vendor (script-src 'self'); nothing is fetched from a third-party host.
const VENDOR = new URL('../vendor/', import.meta.url)
const TEXT_LIMIT = 2 * 1024 * 1024
const BINARY_LIMIT = 25 * 1024 * 1024
const MAX_ROWS = 2000
const MAX_COLS = 200

const extOf = name => {
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

const LANGUAGES = {
  py: 'python', js: 'javascript', jsx: 'javascript', ts: 'typescript', tsx: 'typescript', css: 'css', json: 'json',
  yaml: 'yaml', yml: 'yaml', toml: 'ini', sh: 'bash', bash: 'bash', sql: 'sql', go: 'go', rs: 'rust', java: 'java',
  c: 'c', cpp: 'cpp', h: 'c', hpp: 'cpp', rb: 'ruby', php: 'php', swift: 'swift', kt: 'kotlin', scala: 'scala',
  r: 'r', m: 'objectivec', vue: 'xml', svelte: 'xml', xml: 'xml', dockerfile: 'dockerfile'
}

const scripts = new Map()
function loadScript (path) {
  if (!scripts.has(path)) {
    scripts.set(path, new Promise((resolve, reject) => {
      const script = document.createElement('script')
      script.src = new URL(path, VENDOR).href
      script.onload = resolve
      script.onerror = () => { scripts.delete(path); reject(new Error(`could not load ${path}`)) }
      document.head.append(script)
    }))
  }
  return scripts.get(path)
}
const purify = () => loadScript('dompurify/dist/purify.min.js').then(() => window.DOMPurify)

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

async function fetchBody (file, kind) {
  const res = await fetch(file.url, { cache: 'no-store', credentials: 'omit' })
  if (!res.ok) throw new Error(`the server answered HTTP ${res.status}`)
  return kind === 'text' ? await res.text() : await res.arrayBuffer()
}

function notice (file, title, detail, downloadHref) {
  return el('div', { className: 'notice' }, [
    el('div', { className: 'notice-icon' }, [badgeFor(file)]),
    el('h2', { text: title }),
    el('p', { text: detail }),
    el('a', { className: 'button primary', href: downloadHref, download: file.name, text: `Download ${file.name}` })
  ])
}

/** Sanitised HTML → nodes; relative links and images resolve against the file's own URL (same token). */
async function safeHtml (html, file, className) {
  const DOMPurify = await purify()
  const clean = DOMPurify.sanitize(html, { USE_PROFILES: { html: true }, FORBID_TAGS: ['style', 'form', 'input', 'button'] })
  const box = el('div', { className })
  box.innerHTML = clean
  const base = new URL(file.url, window.location.href)
  for (const node of box.querySelectorAll('[src], [href]')) {
    const attr = node.hasAttribute('src') ? 'src' : 'href'
    const value = node.getAttribute(attr)
    if (value.startsWith('#') || value.startsWith('data:')) continue
    try { node.setAttribute(attr, new URL(value, base).href) } catch { node.removeAttribute(attr) }
    if (node.tagName === 'A') { node.setAttribute('target', '_blank'); node.setAttribute('rel', 'noopener noreferrer') }
  }
  return box
}

function table (rows, truncated) {
  const width = Math.min(MAX_COLS, rows.reduce((m, r) => Math.max(m, r.length), 0))
  const [head = [], ...body] = rows.slice(0, MAX_ROWS + 1)
  const cells = (row, tag) => Array.from({ length: width }, (_, i) => el(tag, { text: row[i] == null ? '' : String(row[i]) }))
  const t = el('table', { className: 'sheet' }, [
    el('thead', {}, [el('tr', {}, cells(head, 'th'))]),
    el('tbody', {}, body.map(row => el('tr', {}, cells(row, 'td'))))
  ])
  const wrap = el('div', { className: 'table-wrap' }, [t])
  if (truncated || rows.length > MAX_ROWS + 1) wrap.append(el('p', { className: 'muted', text: `Showing the first ${MAX_ROWS} rows. Download the file for everything.` }))
  return wrap
}

const RENDERERS = {
  image: file => el('div', { className: 'media image' }, [el('img', { src: file.url, alt: file.name })]),
  audio: file => el('div', { className: 'media audio' }, [el('audio', { src: file.url, controls: '', preload: 'metadata' })]),
  video: file => el('div', { className: 'media video' }, [el('video', { src: file.url, controls: '', preload: 'metadata', playsinline: '' })]),
  pdf: file => el('iframe', { className: 'frame pdf-frame', src: file.url, title: file.name }),
  // Opaque origin: the agent's page may run script but can never read our origin's storage or the token.
  html: file => el('iframe', { className: 'frame html-frame', src: file.url, title: file.name, sandbox: 'allow-scripts allow-forms allow-popups', referrerpolicy: 'no-referrer' }),
  async markdown (file) {
    const [text] = await Promise.all([fetchBody(file, 'text'), loadScript('marked/lib/marked.umd.js')])
    return await safeHtml(window.marked.parse(text, { gfm: true }), file, 'doc markdown')
  },
  async code (file) {
    const [text] = await Promise.all([fetchBody(file, 'text'), loadScript('highlight/highlight.min.js')])
    const hljs = window.hljs
    const lang = LANGUAGES[extOf(file.name)]
    const code = el('code', { className: 'hljs' })
    // highlight.js escapes its input; its output is markup of its own spans only.
    if (lang !== undefined && hljs.getLanguage(lang)) code.innerHTML = hljs.highlight(text, { language: lang, ignoreIllegals: true }).value
    else if (text.length < 100000) code.innerHTML = hljs.highlightAuto(text).value
    else code.textContent = text
    if (lang !== undefined) code.classList.add(`language-${lang}`)
    return el('pre', { className: 'code' }, [code])
  },
  async text (file) {
    return el('pre', { className: 'text' }, [await fetchBody(file, 'text')])
  },
  async spreadsheet (file) {
    const [text] = await Promise.all([fetchBody(file, 'text'), loadScript('papaparse/papaparse.min.js')])
    const parsed = window.Papa.parse(text, { skipEmptyLines: true, delimiter: extOf(file.name) === 'tsv' ? '\t' : '', preview: MAX_ROWS + 1 })
    return table(parsed.data, parsed.meta.truncated)
  },
  async xlsx (file) {
    const [buf] = await Promise.all([fetchBody(file, 'binary'), loadScript('xlsx/dist/xlsx.full.min.js')])
    const XLSX = window.XLSX
    const book = XLSX.read(new Uint8Array(buf), { type: 'array', cellDates: true })
    const box = el('div', { className: 'workbook' })
    const tabs = el('div', { className: 'tabs', role: 'tablist' })
    const body = el('div', { className: 'sheet-body' })
    const show = name => {
      for (const tab of tabs.children) tab.setAttribute('aria-selected', String(tab.dataset.sheet === name))
      const rows = XLSX.utils.sheet_to_json(book.Sheets[name], { header: 1, raw: false, defval: '' })
      body.replaceChildren(rows.length === 0 ? el('p', { className: 'muted', text: 'This sheet is empty.' }) : table(rows, false))
    }
    for (const name of book.SheetNames) {
      const tab = el('button', { type: 'button', role: 'tab', className: 'tab', text: name })
      tab.dataset.sheet = name
      tab.addEventListener('click', () => show(name))
      tabs.append(tab)
    }
    box.append(tabs, body)
    if (book.SheetNames.length > 0) show(book.SheetNames[0])
    return box
  },
  async docx (file) {
    const [buf] = await Promise.all([fetchBody(file, 'binary'), loadScript('mammoth/mammoth.browser.min.js')])
    const result = await window.mammoth.convertToHtml({ arrayBuffer: buf })
    return await safeHtml(result.value, file, 'doc docx')
  }
}

const LIMITS = { markdown: TEXT_LIMIT, code: TEXT_LIMIT, text: TEXT_LIMIT, spreadsheet: TEXT_LIMIT, xlsx: BINARY_LIMIT, docx: BINARY_LIMIT }

/** Renders `file` into `target` unless another file was selected meanwhile (`stillCurrent`). */
export async function renderPreview (file, target, { stillCurrent, downloadHref }) {
  target.dataset.type = file.type
  target.setAttribute('aria-busy', 'true')
  target.replaceChildren(el('div', { className: 'loading', text: 'Loading preview…' }))
  let node
  const render = RENDERERS[file.type]
  try {
    if (render === undefined) {
      node = notice(file, 'No preview for this file type', `${file.name} (${file.mime}) can be downloaded and opened on your computer.`, downloadHref)
    } else if (LIMITS[file.type] !== undefined && file.size > LIMITS[file.type]) {
      node = notice(file, 'Too large to preview here', `${file.name} is larger than the preview limit.`, downloadHref)
    } else {
      node = await render(file)
    }
  } catch (err) {
    node = notice(file, 'Could not show a preview', String(err && err.message ? err.message : err), downloadHref)
  }
  if (!stillCurrent()) return
  target.removeAttribute('aria-busy')
  target.dataset.rendered = file.path
  target.replaceChildren(node)
}
