/*
 * The default (slim) image does office work (docs/contract.md#skills): python-docx, openpyxl, reportlab, pypdf,
 * matplotlib and pandas from Debian, pptxgenjs for Node.js, each producing a real file in a sandbox
 * through bash_tool that is then read back (inside with the libraries, outside by its bytes).
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { chatPaths } from '../../core/chat-paths.js'
import { entries } from '../../fastify.config.js'
import { connect, textOf } from '../fixtures/mcp-probe.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { cleanupPrefix, dockerOrSkip, TEST_IMAGE } from './docker.js'

const gate = await dockerOrSkip()
const prefix = `t-${randomBytes(3).toString('hex')}`
const OUT = '/mnt/user-data/outputs'

async function sh (c: Client, command: string): Promise<string> {
  return textOf(await c.callTool({ name: 'bash_tool', arguments: { command, description: 'office libraries test' } }, undefined, { timeout: 180_000 }))
}

const PYTHON = `python3 - <<'EOF'
import docx, openpyxl, pypdf, pandas, matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt
from reportlab.pdfgen import canvas
out = '${OUT}'
d = docx.Document(); d.add_heading('Quarterly report', 0); d.add_paragraph('Revenue grew 12%.'); d.save(f'{out}/report.docx')
print('docx:', [p.text for p in docx.Document(f'{out}/report.docx').paragraphs])
wb = openpyxl.Workbook(); ws = wb.active; ws.title = 'Revenue'; ws.append(['quarter', 'revenue']); ws.append(['Q1', 10]); ws.append(['Q2', 12]); ws['C2'] = '=B2*2'; wb.save(f'{out}/revenue.xlsx')
print('xlsx:', openpyxl.load_workbook(f'{out}/revenue.xlsx')['Revenue']['C2'].value)
print('pandas:', int(pandas.read_excel(f'{out}/revenue.xlsx')['revenue'].sum()))
c = canvas.Canvas(f'{out}/hello.pdf'); c.drawString(100, 750, 'Hello from reportlab'); c.showPage(); c.drawString(100, 750, 'Page two'); c.save()
r = pypdf.PdfReader(f'{out}/hello.pdf'); print('pdf:', len(r.pages), r.pages[0].extract_text().strip())
plt.plot([1, 2, 3], [10, 12, 9]); plt.title('Revenue'); plt.savefig(f'{out}/chart.png')
print('png: ok')
EOF`

const NODE = `cd /tmp && node -e '
const PptxGenJS = require("pptxgenjs")
const deck = new PptxGenJS()
deck.addSlide().addText("Kick-off", { x: 1, y: 1, fontSize: 32 })
deck.addSlide().addText("Next steps", { x: 1, y: 1 })
deck.writeFile({ fileName: "${OUT}/deck.pptx" }).then(f => console.log("pptx:", f))
' && python3 -c "import zipfile; n = sorted(x for x in zipfile.ZipFile('${OUT}/deck.pptx').namelist() if x.startswith('ppt/slides/slide')); print('slides:', n)"`

// the office libraries produce docx/xlsx/pptx/pdf in a sandbox of the default image
t.test('the sandbox image makes docx, xlsx, pdf, png with Python and pptx with Node.js', gate, async t => {
  await cleanupPrefix(t, prefix)
  const dataDir = await mkdtemp(join(tmpdir(), `${prefix}-data-`))
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, DATA_DIR: dataDir, SANDBOX_PREFIX: prefix, DOCKER_IMAGE: TEST_IMAGE, CONTAINER_MEM_LIMIT: '1g' },
    config => entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools']))
  const chat = `office-${randomBytes(3).toString('hex')}`
  const c = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': chat })

  const py = await sh(c, PYTHON)
  t.match(py, "docx: ['Quarterly report', 'Revenue grew 12%.']", 'python-docx writes and reads back')
  t.match(py, 'xlsx: =B2*2', 'openpyxl keeps the formula')
  t.match(py, 'pandas: 22', 'pandas reads the workbook')
  t.match(py, 'pdf: 2 Hello from reportlab', 'reportlab writes, pypdf reads the text')
  t.match(py, 'png: ok', 'matplotlib renders headless')
  const node = await sh(c, NODE)
  t.match(node, `pptx: ${OUT}/deck.pptx`)
  t.match(node, "slides: ['ppt/slides/slide1.xml', 'ppt/slides/slide2.xml']", 'two slides')

  const outputs = chatPaths(dataDir, chat).outputs
  for (const name of ['report.docx', 'revenue.xlsx', 'deck.pptx']) {
    t.equal((await readFile(join(outputs, name))).subarray(0, 4).toString('latin1'), 'PK\u0003\u0004', `${name} is an OOXML zip in outputs`)
  }
  t.equal((await readFile(join(outputs, 'hello.pdf'))).subarray(0, 5).toString('latin1'), '%PDF-')
  t.equal((await readFile(join(outputs, 'chart.png'))).subarray(1, 4).toString('latin1'), 'PNG')

  // the pptx skill's scripts, run as its SKILL.md says, make a deck that reads back with the right slides
  t.test('the pptx skill: outline → make_deck.js → read_deck.js', async t => {
    const skill = await sh(c, 'cat /mnt/skills/public/pptx/SKILL.md')
    const outline = /```json\n([\s\S]*?)```/.exec(skill)?.[1]
    const build = /```bash\n(node \/mnt\/skills\/public\/pptx\/scripts\/make_deck\.js [^\n]+)\n```/.exec(skill)?.[1]
    const check = /```bash\n(node \/mnt\/skills\/public\/pptx\/scripts\/read_deck\.js [^\n]+)\n```/.exec(skill)?.[1]
    t.ok(outline !== undefined && build !== undefined && check !== undefined, 'the SKILL.md has the outline, build and check steps')
    // The example outline's image slide uses the chart drawn above; the JSON goes in exactly as documented.
    await sh(c, `cat > /tmp/outline.json <<'EOF'\n${outline ?? ''}EOF`)
    t.match(await sh(c, build ?? 'false'), /^wrote \/mnt\/user-data\/outputs\/review\.pptx \(5 slides\)\n/)
    const text = await sh(c, check ?? 'false')
    t.match(text, /^5 slides\n--- slide 1\nQuarterly review\nQ3 2026\n--- slide 2\nHighlights\nRevenue \+12%\nTwo new markets\nBerlin\nLyon\n/)
    t.match(text, '--- slide 4\nNumbers\nQuarter\nRevenue\nQ2\n10.1\nQ3\n11.3')
    t.match(await sh(c, 'unzip -l /mnt/user-data/outputs/review.pptx | grep -c "ppt/media/.*png"'), /^[1-9]\n/, 'the image slide embeds the PNG')
    const bad = await sh(c, 'echo \'{"slides":[{"type":"bullets","title":"x","bullets":"not a list"}]}\' > /tmp/bad.json; node /mnt/skills/public/pptx/scripts/make_deck.js /tmp/bad.json /tmp/bad.pptx; echo rc=$?')
    t.match(bad, /slides\[0\]\.bullets must be a list[\s\S]*rc=2/, 'a wrong outline names the slide and field')
  })
})
