/*
 * Small real files of every preview type, generated in the test so nothing opaque is checked in
 * (only the 2 KB WebM clip, recorded once with Chromium's MediaRecorder: no encoder is available here).
 */
import { readFileSync } from 'node:fs'
import { deflateSync } from 'node:zlib'
import { ZipFile } from 'yazl'

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n
  for (let k = 0; k < 8; k++) c = (c & 1) !== 0 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
  return c >>> 0
})
function crc32 (buf: Buffer): number {
  let c = 0xffffffff
  for (const b of buf) c = (CRC_TABLE[(c ^ b) & 0xff] as number) ^ (c >>> 8)
  return (c ^ 0xffffffff) >>> 0
}

/** An RGB PNG with a diagonal gradient. */
export function png (width = 96, height = 64): Buffer {
  const raw = Buffer.alloc((width * 3 + 1) * height)
  for (let y = 0; y < height; y++) {
    const row = y * (width * 3 + 1)
    for (let x = 0; x < width; x++) {
      raw[row + 1 + x * 3] = Math.round(255 * x / width)
      raw[row + 2 + x * 3] = Math.round(255 * y / height)
      raw[row + 3 + x * 3] = 180
    }
  }
  const chunk = (type: string, data: Buffer): Buffer => {
    const len = Buffer.alloc(4)
    len.writeUInt32BE(data.length)
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data])
    const crc = Buffer.alloc(4)
    crc.writeUInt32BE(crc32(body))
    return Buffer.concat([len, body, crc])
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(width, 0)
  ihdr.writeUInt32BE(height, 4)
  ihdr.set([8, 2, 0, 0, 0], 8)
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))])
}

/** A one-page PDF with a line of text (valid xref offsets). */
export function pdf (text: string): Buffer {
  const stream = `BT /F1 24 Tf 72 720 Td (${text.replace(/[()\\]/g, '')}) Tj ET`
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>',
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>'
  ]
  let out = '%PDF-1.4\n'
  const offsets: number[] = []
  objects.forEach((body, i) => { offsets.push(out.length); out += `${i + 1} 0 obj\n${body}\nendobj\n` })
  const xref = out.length
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map(o => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
  return Buffer.from(out, 'latin1')
}

/** A zip of in-memory entries, built with the same library the server streams archives with. */
export async function zip (entries: Record<string, string | Buffer>): Promise<Buffer> {
  const file = new ZipFile()
  for (const [name, content] of Object.entries(entries)) file.addBuffer(Buffer.from(content), name)
  file.end()
  const chunks: Buffer[] = []
  for await (const chunk of file.outputStream) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/** A minimal WordprocessingML document: a heading-styled first paragraph and body paragraphs. */
export async function docx (paragraphs: string[]): Promise<Buffer> {
  const body = paragraphs.map((p, i) => i === 0
    ? `<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>${esc(p)}</w:t></w:r></w:p>`
    : `<w:p><w:r><w:t xml:space="preserve">${esc(p)}</w:t></w:r></w:p>`).join('')
  return await zip({
    '[Content_Types].xml': '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
    '_rels/.rels': '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
    'word/document.xml': `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>${body}</w:body></w:document>`
  })
}

/** A minimal SpreadsheetML workbook with one sheet of inline strings and numbers. */
export async function xlsx (sheetName: string, rows: Array<Array<string | number>>): Promise<Buffer> {
  const col = (i: number): string => String.fromCharCode(65 + i)
  const sheetRows = rows.map((row, r) => `<row r="${r + 1}">${row.map((v, c) => typeof v === 'number'
    ? `<c r="${col(c)}${r + 1}"><v>${v}</v></c>`
    : `<c r="${col(c)}${r + 1}" t="inlineStr"><is><t>${esc(v)}</t></is></c>`).join('')}</row>`).join('')
  return await zip({
    '[Content_Types].xml': '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>',
    '_rels/.rels': '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>',
    'xl/workbook.xml': `<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="${esc(sheetName)}" sheetId="1" r:id="rId1"/></sheets></workbook>`,
    'xl/_rels/workbook.xml.rels': '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>',
    'xl/worksheets/sheet1.xml': `<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>${sheetRows}</sheetData></worksheet>`
  })
}

export type Cell = string | number | boolean | Date | { formula: string, value: number }
const RELS = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships'
const MAIN = 'http://schemas.openxmlformats.org/spreadsheetml/2006/main'

/**
 * A workbook shaped like the ones Excel and openpyxl write: several sheets, a shared-strings table, a date
 * number format (cells with style 1), booleans and formulas with cached values.
 */
export async function workbook (sheets: Array<{ name: string, rows: Cell[][] }>): Promise<Buffer> {
  const strings: string[] = []
  const shared = (v: string): number => { const i = strings.indexOf(v); return i >= 0 ? i : strings.push(v) - 1 }
  const col = (i: number): string => String.fromCharCode(65 + i)
  const cell = (v: Cell, ref: string): string => {
    if (typeof v === 'string') return `<c r="${ref}" t="s"><v>${shared(v)}</v></c>`
    if (typeof v === 'boolean') return `<c r="${ref}" t="b"><v>${v ? 1 : 0}</v></c>`
    if (v instanceof Date) return `<c r="${ref}" s="1"><v>${v.getTime() / 86400000 + 25569}</v></c>`
    if (typeof v === 'number') return `<c r="${ref}"><v>${v}</v></c>`
    return `<c r="${ref}"><f>${esc(v.formula)}</f><v>${v.value}</v></c>`
  }
  const sheetXml = (rows: Cell[][]): string => `<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="${MAIN}"><sheetData>${rows.map((row, r) =>
    `<row r="${r + 1}">${row.map((v, c) => cell(v, `${col(c)}${r + 1}`)).join('')}</row>`).join('')}</sheetData></worksheet>`
  const entries: Record<string, string> = {}
  sheets.forEach((sheet, i) => { entries[`xl/worksheets/sheet${i + 1}.xml`] = sheetXml(sheet.rows) })
  const ct = (part: string, type: string): string => `<Override PartName="/${part}" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.${type}+xml"/>`
  return await zip({
    '[Content_Types].xml': `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>${ct('xl/workbook.xml', 'sheet.main')}${ct('xl/sharedStrings.xml', 'sharedStrings')}${ct('xl/styles.xml', 'styles')}${sheets.map((_, i) => ct(`xl/worksheets/sheet${i + 1}.xml`, 'worksheet')).join('')}</Types>`,
    '_rels/.rels': `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="${RELS}/officeDocument" Target="xl/workbook.xml"/></Relationships>`,
    'xl/workbook.xml': `<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="${MAIN}" xmlns:r="${RELS}"><sheets>${sheets.map((sheet, i) => `<sheet name="${esc(sheet.name).replace(/"/g, '&quot;')}" sheetId="${i + 1}" r:id="rId${i + 1}"/>`).join('')}</sheets></workbook>`,
    'xl/_rels/workbook.xml.rels': `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">${sheets.map((_, i) => `<Relationship Id="rId${i + 1}" Type="${RELS}/worksheet" Target="worksheets/sheet${i + 1}.xml"/>`).join('')}<Relationship Id="rIdS" Type="${RELS}/sharedStrings" Target="sharedStrings.xml"/><Relationship Id="rIdT" Type="${RELS}/styles" Target="styles.xml"/></Relationships>`,
    'xl/styles.xml': `<?xml version="1.0" encoding="UTF-8"?><styleSheet xmlns="${MAIN}"><cellXfs count="2"><xf numFmtId="0"/><xf numFmtId="14" applyNumberFormat="1"/></cellXfs></styleSheet>`,
    ...entries,
    'xl/sharedStrings.xml': `<?xml version="1.0" encoding="UTF-8"?><sst xmlns="${MAIN}" count="${strings.length}" uniqueCount="${strings.length}">${strings.map(v => `<si><t xml:space="preserve">${esc(v)}</t></si>`).join('')}</sst>`
  })
}

/** A DOCX whose one paragraph is a hyperlink to `target` (mammoth turns it into `<a href>`). */
export async function docxWithLink (text: string, target: string): Promise<Buffer> {
  return await zip({
    '[Content_Types].xml': '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
    '_rels/.rels': `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="${RELS}/officeDocument" Target="word/document.xml"/></Relationships>`,
    'word/_rels/document.xml.rels': `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId2" Type="${RELS}/hyperlink" Target="${esc(target).replace(/"/g, '&quot;')}" TargetMode="External"/></Relationships>`,
    'word/document.xml': `<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="${RELS}"><w:body><w:p><w:hyperlink r:id="rId2"><w:r><w:t xml:space="preserve">${esc(text)}</w:t></w:r></w:hyperlink></w:p><w:p><w:r><w:t xml:space="preserve">${esc('<img src=x onerror="window.__pwned=7">')}</w:t></w:r></w:p></w:body></w:document>`
  })
}

/** The first bytes of an OLE compound file (a legacy Excel 97–2003 .xls), padded to one 512-byte sector. */
export const oleCompound = (): Buffer => Buffer.concat([Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]), Buffer.alloc(504)])

/** One second of a 440 Hz sine as 8 kHz 16-bit mono PCM WAV. */
export function wav (seconds = 1): Buffer {
  const rate = 8000
  const samples = rate * seconds
  const buf = Buffer.alloc(44 + samples * 2)
  buf.write('RIFF', 0, 'latin1')
  buf.writeUInt32LE(36 + samples * 2, 4)
  buf.write('WAVEfmt ', 8, 'latin1')
  buf.writeUInt32LE(16, 16)
  buf.writeUInt16LE(1, 20)
  buf.writeUInt16LE(1, 22)
  buf.writeUInt32LE(rate, 24)
  buf.writeUInt32LE(rate * 2, 28)
  buf.writeUInt16LE(2, 32)
  buf.writeUInt16LE(16, 34)
  buf.write('data', 36, 'latin1')
  buf.writeUInt32LE(samples * 2, 40)
  for (let i = 0; i < samples; i++) buf.writeInt16LE(Math.round(Math.sin(2 * Math.PI * 440 * i / rate) * 12000), 44 + i * 2)
  return buf
}

export const webm = (): Buffer => readFileSync(new URL('../fixtures/preview/clip.webm', import.meta.url))

/** Every preview type, keyed by the relative path written below outputs. */
export async function allFixtures (): Promise<Record<string, string | Buffer>> {
  return {
    'images/chart.png': png(),
    'report.pdf': pdf('Quarterly report'),
    'notes/summary.md': '# Summary heading\n\nSome **bold** text and a list:\n\n- alpha\n- beta\n\n<img src=x onerror="window.__pwned=1">\n<script>window.__pwned=2</script>\n',
    'data/table.csv': 'city,population\nBerlin,3645000\nParis,2161000\nRome,2873000\n',
    'data/book.xlsx': await xlsx('Budget', [['item', 'cost'], ['laptop', 1200], ['desk', 300]]),
    'data/quarters.xlsx': await workbook([
      { name: 'Q1', rows: [['month', 'revenue', 'closed', 'booked'], ['Jan', 1234.5, true, new Date(Date.UTC(2026, 0, 31))], ['Feb', { formula: 'B2*2', value: 2469 }, false, new Date(Date.UTC(2026, 1, 28))]] },
      { name: 'Q2 & notes', rows: [['note'], ['shared strings, a second sheet']] }
    ]),
    'data/legacy.xls': oleCompound(),
    'letter.docx': await docx(['Letter title', 'Dear reader, this came from a DOCX file.']),
    'src/app.py': 'def greet(name):\n    return f"hello {name}"\n\nprint(greet("world"))\n',
    'log.txt': 'plain text line one\nline two <b>not bold</b>\n',
    'sound.wav': wav(),
    'clip.webm': webm(),
    'site/index.html': '<!doctype html><html><head><link rel="stylesheet" href="style.css"></head><body><h1 id="agent">Agent page</h1><script>document.getElementById("agent").dataset.ran = "yes"; try { document.getElementById("agent").dataset.cookie = String(document.cookie) } catch (e) { document.getElementById("agent").dataset.cookie = "blocked" }</script></body></html>',
    'site/style.css': 'h1 { color: rgb(200, 30, 30); }',
    'deck.pptx': await zip({ 'ppt/presentation.xml': '<p/>' })
  }
}
