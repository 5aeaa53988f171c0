// Source code: highlight.js (regex-heavy, so a ReDoS target) runs in the parser worker; the page keeps only
// its `<span class="hljs-…">` markup. Very large files are shown as plain text without parsing.
import { el, extOf } from '../dom.js'
import { fetchBytes } from '../fetch-file.js'
import { parseInWorker } from '../parse.js'
import { highlightMarkup } from '../sanitize.js'

const HIGHLIGHT_LIMIT = 1024 * 1024

const LANGUAGES = {
  py: 'python', js: 'javascript', jsx: 'javascript', ts: 'typescript', tsx: 'typescript', css: 'css', json: 'json',
  yaml: 'yaml', yml: 'yaml', toml: 'ini', sh: 'bash', bash: 'bash', sql: 'sql', go: 'go', rs: 'rust', java: 'java',
  c: 'c', cpp: 'cpp', h: 'c', hpp: 'cpp', rb: 'ruby', php: 'php', swift: 'swift', kt: 'kotlin', scala: 'scala',
  r: 'r', m: 'objectivec', vue: 'xml', svelte: 'xml', xml: 'xml', dockerfile: 'dockerfile'
}

export default async function code (file, ctx) {
  const bytes = await fetchBytes(file.url, ctx.limit, ctx.signal)
  const lang = LANGUAGES[extOf(file.name)]
  const node = el('code', { className: 'hljs' })
  if (lang !== undefined) node.classList.add(`language-${lang}`)
  if (bytes.byteLength > HIGHLIGHT_LIMIT) {
    node.textContent = new TextDecoder('utf-8').decode(bytes)
    return el('pre', { className: 'code' }, [node])
  }
  const result = await parseInWorker('code', bytes, { ...ctx, options: { language: lang ?? '' } })
  if (typeof result.html === 'string') node.innerHTML = await highlightMarkup(result.html)
  else node.textContent = String(result.text ?? '')
  return el('pre', { className: 'code' }, [node])
}
