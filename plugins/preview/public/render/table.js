// The table both spreadsheet renderers (CSV/TSV and XLSX) draw; cells arrive as plain data from the worker.
import { el } from '../dom.js'

export const MAX_ROWS = 2000

export function table (rows, truncated) {
  const width = rows.reduce((max, row) => Math.max(max, Array.isArray(row) ? row.length : 0), 0)
  const [head = [], ...body] = rows.slice(0, MAX_ROWS + 1)
  const cells = (row, tag) => Array.from({ length: width }, (_, i) => el(tag, { text: row[i] == null ? '' : String(row[i]) }))
  const sheet = el('table', { className: 'sheet' }, [
    el('thead', {}, [el('tr', {}, cells(head, 'th'))]),
    el('tbody', {}, body.map(row => el('tr', {}, cells(Array.isArray(row) ? row : [], 'td'))))
  ])
  const wrap = el('div', { className: 'table-wrap' }, [sheet])
  if (truncated || rows.length > MAX_ROWS + 1) wrap.append(el('p', { className: 'muted', text: `Showing the first ${MAX_ROWS} rows. Download the file for everything.` }))
  return wrap
}
