// XLSX: read-excel-file runs in the parser worker and answers each sheet's rows as strings; the page draws
// one tab per sheet. Legacy binary workbooks (.xls, Excel 97–2003) are recognised and offered as a download.
import { NoPreviewError, el } from '../dom.js'
import { fetchBytes } from '../fetch-file.js'
import { parseInWorker } from '../parse.js'
import { table } from './table.js'

const isOleCompound = bytes => {
  const head = new Uint8Array(bytes, 0, Math.min(4, bytes.byteLength))
  return head.length === 4 && head[0] === 0xd0 && head[1] === 0xcf && head[2] === 0x11 && head[3] === 0xe0
}

function sheetBody (sheet) {
  if (sheet.omitted) return el('p', { className: 'muted', text: 'This sheet is not shown: the workbook is too large to preview in full. Download the file for everything.' })
  if (!Array.isArray(sheet.rows) || sheet.rows.length === 0) return el('p', { className: 'muted', text: 'This sheet is empty.' })
  return table(sheet.rows, sheet.truncated === true)
}

export default async function xlsx (file, ctx) {
  const bytes = await fetchBytes(file.url, ctx.limit, ctx.signal)
  if (isOleCompound(bytes)) throw new NoPreviewError('This is a legacy Excel 97–2003 workbook (.xls), which has no preview here. Download it, or ask the assistant to save it as .xlsx.')
  const { sheets = [], moreSheets = false } = await parseInWorker('xlsx', bytes, ctx)
  const box = el('div', { className: 'workbook' })
  const tabs = el('div', { className: 'tabs', role: 'tablist' })
  const body = el('div', { className: 'sheet-body' })
  const show = index => {
    for (const tab of tabs.children) tab.setAttribute('aria-selected', String(tab.dataset.index === String(index)))
    body.replaceChildren(sheetBody(sheets[index]))
  }
  sheets.forEach((sheet, index) => {
    const tab = el('button', { type: 'button', role: 'tab', className: 'tab', text: String(sheet.name), dataset: { index: String(index) } })
    tab.addEventListener('click', () => show(index))
    tabs.append(tab)
  })
  box.append(tabs, body)
  if (moreSheets) box.append(el('p', { className: 'muted', text: 'Only the first 50 sheets are shown.' }))
  if (sheets.length > 0) show(0)
  else body.append(el('p', { className: 'muted', text: 'This workbook has no sheets.' }))
  return box
}
