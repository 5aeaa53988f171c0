/*
 * The reading skills of the image, followed literally (docs/contract.md#skills): file-reading, pdf-reading and
 * describe-image. The inputs are real files made inside the sandbox (python-docx, openpyxl,
 * reportlab, Pillow), placed in the chat's uploads; the commands are the lines the SKILL.md shows.
 */
import { copyFile, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { dockerOrSkip } from './docker.js'
import { commandOf, imageOf, skillChat } from './skill-recipes.js'

const gate = await dockerOrSkip()
const SRC = '/mnt/user-data/outputs/src'

const MAKE_INPUTS = `mkdir -p ${SRC} && cd ${SRC} && python3 - <<'EOF'
import docx, openpyxl
from reportlab.pdfgen import canvas
from PIL import Image, ImageDraw, ImageFont
d = docx.Document(); d.add_heading('Budget memo', 1); d.add_paragraph('Grand total 1,234 EUR for the year.')
t = d.add_table(rows=2, cols=2); t.cell(0, 0).text = 'item'; t.cell(0, 1).text = 'cost'; t.cell(1, 0).text = 'paper'; t.cell(1, 1).text = '42'
d.save('report.docx'); d.save('memo.pdf')
wb = openpyxl.Workbook(); ws = wb.active; ws.title = 'Costs'; ws.append(['item', 'cost']); ws.append(['toner', 99]); wb.save('costs.xlsx')
open('people.csv', 'w').write('name;city\\nAnn;Lyon\\nBob;Graz\\n')
font = ImageFont.truetype('/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf', 64)
scan = Image.new('L', (1400, 300), 255); ImageDraw.Draw(scan).text((40, 100), 'SCANNED INVOICE 4711', fill=0, font=font); scan.save('/tmp/scan.png')
c = canvas.Canvas('report.pdf'); c.drawString(72, 780, 'Quarterly figures')
for i, row in enumerate([('Region', 'Units', 'Revenue'), ('North', '120', '4,300'), ('South', '95', '3,150')]):
    for j, cell in enumerate(row): c.drawString(72 + j * 150, 740 - i * 18, cell)
c.showPage(); c.drawImage('/tmp/scan.png', 50, 500, width=500, height=107); c.showPage(); c.save()
photo = Image.new('RGB', (1600, 1000), (230, 240, 250)); ImageDraw.Draw(photo).rectangle([400, 300, 800, 500], fill=(200, 30, 30)); photo.save('photo.jpg')
print('inputs ready')
EOF`

t.test('file-reading, pdf-reading and describe-image as their SKILL.md says', gate, async t => {
  const chat = await skillChat(t, 'reading')
  const { sh } = chat
  t.match(await sh(MAKE_INPUTS), 'inputs ready')
  for (const f of await readdir(join(chat.outputs, 'src'))) await copyFile(join(chat.outputs, 'src', f), join(chat.uploads, f))

  // file-reading identifies an upload and extracts the text of docx/xlsx/pdf made in the test
  t.test('file-reading', async t => {
    const md = await sh('cat /mnt/skills/public/file-reading/SKILL.md')
    const S = 'python3 /mnt/skills/public/file-reading/scripts/file_summary.py'
    const summary = commandOf(t, md, S, 'report.docx')
    const docx = await sh(summary)
    t.match(docx, /kind: docx\n/)
    t.match(docx, 'Microsoft Word 2007+', 'the type comes from `file`')
    t.match(docx, /# Budget memo\nGrand total 1,234 EUR for the year\.\n## table 1\nitem\tcost\npaper\t42/, 'headings, paragraphs and the table')
    const out = await sh(`${commandOf(t, md, S, 'report.docx', '--out /tmp/report.txt')} && ${commandOf(t, md, 'grep -n -i "total" /tmp/report.txt')}`)
    t.match(out, /full text: \d+ chars written to \/tmp\/report\.txt[\s\S]*2:Grand total 1,234 EUR/, '--out keeps the full text for grep')
    t.match(await sh(summary.replace('report.docx', 'costs.xlsx')), /kind: xlsx\nsheets: 1\nsheet 'Costs': 2 rows x 2 columns[\s\S]*item\tcost\ntoner\t99/)
    t.match(await sh(summary.replace('report.docx', 'report.pdf')), /kind: pdf\n[\s\S]*Pages: +2[\s\S]*Region +Units +Revenue/)
    const lying = await sh(summary.replace('report.docx', 'memo.pdf'))
    t.match(lying, 'kind: docx', 'the content decides, not the extension')
    t.match(lying, 'NOTE: the extension .pdf does not match the content (docx)')
    t.match(await sh(summary.replace('report.docx', 'people.csv')), /kind: csv\nencoding: utf-8\ndelimiter: ';'[\s\S]*header: name \| city/)
    t.match(await sh(`${summary.replace('report.docx', 'missing.txt')}; echo rc=$?`), /not a regular file[\s\S]*rc=2/)
  })

  // pdf-reading finds the scanned page, extracts text and tables, renders pages for view, and says whether OCR is there
  t.test('pdf-reading', async t => {
    const md = await sh('cat /mnt/skills/public/pdf-reading/SKILL.md')
    const S = 'python3 /mnt/skills/public/pdf-reading/scripts/pdf_read.py'
    const hasOcr = /yes/.test(await sh('command -v tesseract >/dev/null && echo yes || echo no'))
    const probe = await sh(commandOf(t, md, S, 'probe'))
    t.match(probe, 'text layer: missing on pages 2 -> those are scans')
    t.match(probe, hasOcr ? 'OCR: available (tesseract' : 'OCR: not in this image', 'the probe tells whether OCR works in this image')
    t.match(await sh(commandOf(t, md, S, 'text', '--pages 1-5')), /=== page 1\nQuarterly figures[\s\S]*=== page 2\n/)
    const tables = await sh(`${commandOf(t, md, S, 'tables')} && cat /tmp/tables.csv`)
    t.match(tables, /# table 1 \(page 1, 3 rows x 3 columns\)\nRegion,Units,Revenue\nNorth,120,"4,300"\nSouth,95,"3,150"/)
    t.match(tables, /wrote \/tmp\/tables\.csv \(1 tables\)/)
    const pages = await sh(commandOf(t, md, S, 'pages', '--pages 1-2'))
    t.match(pages, /\/tmp\/pdf-pages\/page-1\.png\n\/tmp\/pdf-pages\/page-2\.png\n/)
    const view = imageOf(await chat.tool('view', { path: '/tmp/pdf-pages/page-2.png', description: 'look at the scan' }))
    t.ok(view !== undefined && view.bytes.length > 1000, 'view shows the rendered scan')
    const ocr = await sh(`${commandOf(t, md, S, 'ocr').replace('/mnt/user-data/uploads/scan.pdf', '/mnt/user-data/uploads/report.pdf').replace('--pages 1-3', '--pages 2')}; echo rc=$?; cat /tmp/scan.txt 2>/dev/null`)
    if (hasOcr) t.match(ocr, /rc=0[\s\S]*=== page 2 \(OCR\)\nSCANNED INVOICE 4711/, 'OCR reads the scanned page (full image)')
    else t.match(ocr, /OCR needs tesseract, which is only in the full image[\s\S]*rc=3/, 'without tesseract the OCR step says why and exits 3')
    t.match(await sh(`${S} text /mnt/user-data/uploads/report.pdf --pages 9; echo rc=$?`), /pages 9 outside 1-2[\s\S]*rc=2/)
  })

  // describe-image's crop script produces an image of the right size that view shows
  t.test('describe-image', async t => {
    const md = await sh('cat /mnt/skills/public/describe-image/SKILL.md')
    const S = 'python3 /mnt/skills/public/describe-image/scripts/image_tool.py'
    t.match(await sh(commandOf(t, md, S, 'info')), /format: JPEG\nsize as stored: 1600x1000[\s\S]*size upright: 1600x1000/)
    t.match(await sh(commandOf(t, md, S, 'grid')), 'wrote /tmp/grid.png (1600x1000)')
    const crop = commandOf(t, md, S, 'crop')
    t.match(crop, '--box 400,300,800,500 --zoom 2')
    t.match(await sh(crop), 'wrote /tmp/crop.png (800x400)', 'a 400x200 box zoomed twice')
    const check = await sh('python3 -c "from PIL import Image; im = Image.open(\'/tmp/crop.png\'); print(im.size, im.convert(\'RGB\').getpixel((400, 200)))"')
    t.match(check, /\(800, 400\) \((19\d|20\d|21\d), (2\d|3\d|4\d), (2\d|3\d|4\d)\)/, 'the crop holds the red rectangle')
    const view = imageOf(await chat.tool('view', { path: '/tmp/crop.png', description: 'look at the crop' }))
    t.ok(view !== undefined && view.bytes.length > 100, 'view shows the crop')
    t.match(await sh(`${S} crop /mnt/user-data/uploads/photo.jpg --box 0.5,0,1,0.5 -o /tmp/q.png`), 'wrote /tmp/q.png (800x500)', 'fraction boxes')
    t.match(await sh(`${S} crop /mnt/user-data/uploads/photo.jpg --box 0,0,2000,10 -o /tmp/x.png; echo rc=$?`), /not inside the image[\s\S]*rc=2/)
  })
})
