// CSV and TSV: papaparse runs in the parser worker and answers rows of strings.
import { extOf } from '../dom.js'
import { fetchBytes } from '../fetch-file.js'
import { parseInWorker } from '../parse.js'
import { table } from './table.js'

export default async function spreadsheet (file, ctx) {
  const bytes = await fetchBytes(file.url, ctx.limit, ctx.signal)
  const delimiter = extOf(file.name) === 'tsv' ? '\t' : ''
  const { rows, truncated } = await parseInWorker('csv', bytes, { ...ctx, options: { delimiter } })
  return table(Array.isArray(rows) ? rows : [], truncated === true)
}
