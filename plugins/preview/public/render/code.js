// Source code: highlight.js (regex-heavy, so a ReDoS target) runs in the parser worker, which answers a tree
// of class names and strings; the page builds it from text nodes and spans whose classes are syntax classes
// only, so nothing of it is parsed as HTML here. Very large files are shown as plain text without parsing.
import { el, extOf } from '../dom.js'
import { fetchBytes } from '../fetch-file.js'
import { parseInWorker } from '../parse.js'
import { safeClasses } from '../sanitize.js'

const HIGHLIGHT_LIMIT = 1024 * 1024
const MAX_DEPTH = 32

const LANGUAGES = {
  py: 'python',
  js: 'javascript',
  jsx: 'javascript',
  ts: 'typescript',
  tsx: 'typescript',
  css: 'css',
  json: 'json',
  yaml: 'yaml',
  yml: 'yaml',
  toml: 'ini',
  sh: 'bash',
  bash: 'bash',
  sql: 'sql',
  go: 'go',
  rs: 'rust',
  java: 'java',
  c: 'c',
  cpp: 'cpp',
  h: 'c',
  hpp: 'cpp',
  rb: 'ruby',
  php: 'php',
  swift: 'swift',
  kt: 'kotlin',
  scala: 'scala',
  r: 'r',
  m: 'objectivec',
  vue: 'xml',
  svelte: 'xml',
  xml: 'xml',
  dockerfile: 'dockerfile'
}

/**
 * `[className, ...children]` → spans and text nodes below `root`, iteratively (a hostile tree cannot exhaust
 * the stack); below MAX_DEPTH nested nodes add their text but no more spans.
 */
function build (tree, root) {
  const stack = [{ node: tree, next: 1, parent: root, depth: 0 }]
  while (stack.length > 0) {
    const frame = stack[stack.length - 1]
    if (frame.next >= frame.node.length) { stack.pop(); continue }
    const child = frame.node[frame.next++]
    if (typeof child === 'string') frame.parent.append(child)
    else if (Array.isArray(child)) {
      let parent = frame.parent
      if (frame.depth < MAX_DEPTH) {
        parent = document.createElement('span')
        const names = safeClasses(String(child[0]))
        if (names !== '') parent.className = names
        frame.parent.append(parent)
      }
      stack.push({ node: child, next: 1, parent, depth: frame.depth + 1 })
    }
  }
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
  if (Array.isArray(result.tree)) build(result.tree, node)
  else node.textContent = String(result.text ?? '')
  return el('pre', { className: 'code' }, [node])
}
