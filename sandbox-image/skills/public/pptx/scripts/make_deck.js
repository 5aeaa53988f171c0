#!/usr/bin/env node
// Builds a .pptx from a JSON outline (see ../SKILL.md): node make_deck.js outline.json out.pptx
'use strict'
const fs = require('fs')
const PptxGenJS = require('pptxgenjs')

function fail (msg) { console.error(`make_deck: ${msg}`); process.exit(2) }

const [input, output] = process.argv.slice(2)
if (!input || !output || !output.endsWith('.pptx')) fail('usage: make_deck.js outline.json out.pptx')
let outline
try { outline = JSON.parse(fs.readFileSync(input, 'utf8')) } catch (err) { fail(`cannot read ${input}: ${err.message}`) }
if (!outline || !Array.isArray(outline.slides) || outline.slides.length === 0) fail('the outline needs a non-empty "slides" list')

const deck = new PptxGenJS()
deck.layout = 'LAYOUT_16x9'
if (outline.title) deck.title = String(outline.title)
if (outline.author) deck.author = String(outline.author)

const TITLE = { x: 0.5, y: 0.3, w: 9, h: 0.8, fontSize: 28, bold: true, color: '1F2937' }
const str = (v, where) => { if (typeof v !== 'string' || v === '') fail(`${where} must be a non-empty string`); return v }

function bulletRuns (items, where, level = 0) {
  if (!Array.isArray(items)) fail(`${where} must be a list`)
  const runs = []
  items.forEach((item, i) => {
    if (Array.isArray(item)) runs.push(...bulletRuns(item, `${where}[${i}]`, level + 1))
    else runs.push({ text: str(item, `${where}[${i}]`), options: { bullet: true, indentLevel: level, breakLine: true } })
  })
  return runs
}

const builders = {
  title (s, d, where) {
    s.addText(str(d.title, `${where}.title`), { x: 0.5, y: 1.8, w: 9, h: 1.2, fontSize: 40, bold: true, align: 'center' })
    if (d.subtitle) s.addText(String(d.subtitle), { x: 0.5, y: 3.0, w: 9, h: 0.8, fontSize: 22, align: 'center', color: '4B5563' })
  },
  bullets (s, d, where) {
    s.addText(str(d.title, `${where}.title`), TITLE)
    s.addText(bulletRuns(d.bullets, `${where}.bullets`), { x: 0.7, y: 1.3, w: 8.6, h: 4, fontSize: 20, valign: 'top' })
  },
  'two-column' (s, d, where) {
    s.addText(str(d.title, `${where}.title`), TITLE)
    s.addText(bulletRuns(d.left, `${where}.left`), { x: 0.5, y: 1.3, w: 4.3, h: 4, fontSize: 18, valign: 'top' })
    s.addText(bulletRuns(d.right, `${where}.right`), { x: 5.2, y: 1.3, w: 4.3, h: 4, fontSize: 18, valign: 'top' })
  },
  table (s, d, where) {
    s.addText(str(d.title, `${where}.title`), TITLE)
    if (!Array.isArray(d.rows) || d.rows.length === 0 || !d.rows.every(Array.isArray)) fail(`${where}.rows must be a list of rows`)
    const rows = d.rows.map((r, i) => r.map(c => ({ text: String(c), options: i === 0 ? { bold: true, fill: { color: 'E5E7EB' } } : {} })))
    s.addTable(rows, { x: 0.5, y: 1.3, w: 9, fontSize: 14, border: { type: 'solid', pt: 0.5, color: '9CA3AF' } })
  },
  image (s, d, where) {
    s.addText(str(d.title, `${where}.title`), TITLE)
    const path = str(d.image, `${where}.image`)
    if (!fs.existsSync(path)) fail(`${where}.image: ${path} does not exist`)
    s.addImage({ path, x: 1, y: 1.2, w: 8, h: 4.2, sizing: { type: 'contain', w: 8, h: 4.2 } })
  }
}

outline.slides.forEach((d, i) => {
  const where = `slides[${i}]`
  if (!d || typeof d !== 'object') fail(`${where} must be an object`)
  const build = builders[d.type ?? 'bullets']
  if (!build) fail(`${where}.type must be one of: ${Object.keys(builders).join(', ')}`)
  const s = deck.addSlide()
  build(s, d, where)
  if (d.notes) s.addNotes(String(d.notes))
})

deck.writeFile({ fileName: output }).then(
  () => console.log(`wrote ${output} (${outline.slides.length} slides)`),
  err => fail(`cannot write ${output}: ${err.message}`)
)
