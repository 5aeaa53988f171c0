// DOCX: mammoth converts to HTML in the parser worker; the page sanitises and contains it.
import { fetchBytes } from '../fetch-file.js'
import { parseInWorker } from '../parse.js'
import { documentBox } from '../sanitize.js'

export default async function docx (file, ctx) {
  const bytes = await fetchBytes(file.url, ctx.limit, ctx.signal)
  const { chunks } = await parseInWorker('docx', bytes, ctx)
  return await documentBox(Array.isArray(chunks) ? chunks : [], file, 'doc docx', ctx.signal)
}
