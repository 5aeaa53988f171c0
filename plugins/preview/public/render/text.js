// Plain text: decoded and shown as a text node (no parser involved).
import { el } from '../dom.js'
import { fetchBytes } from '../fetch-file.js'

export default async function text (file, ctx) {
  const bytes = await fetchBytes(file.url, ctx.limit, ctx.signal)
  return el('pre', { className: 'text' }, [new TextDecoder('utf-8').decode(bytes)])
}
