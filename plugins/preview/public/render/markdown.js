// Markdown: marked runs in the parser worker; its HTML is sanitised and contained in the page.
import { fetchBytes } from '../fetch-file.js'
import { parseInWorker } from '../parse.js'
import { documentBox } from '../sanitize.js'

export default async function markdown (file, ctx) {
  const bytes = await fetchBytes(file.url, ctx.limit, ctx.signal)
  const { chunks } = await parseInWorker('markdown', bytes, ctx)
  return await documentBox(Array.isArray(chunks) ? chunks : [], file, 'doc markdown', ctx.signal)
}
