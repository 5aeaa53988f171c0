#!/usr/bin/env node
// Prints the text of each slide of a .pptx in order: node read_deck.js deck.pptx
'use strict'
const { execFileSync } = require('child_process')

const file = process.argv[2]
if (!file) { console.error('usage: read_deck.js deck.pptx'); process.exit(2) }
const run = args => execFileSync('unzip', args, { maxBuffer: 64 * 1024 * 1024 }).toString('utf8')
let names
try { names = run(['-Z1', file]).split('\n') } catch { console.error(`read_deck: ${file} is not a readable .pptx (zip)`); process.exit(2) }
const slides = names.filter(n => /^ppt\/slides\/slide\d+\.xml$/.test(n)).sort((a, b) => Number(a.match(/\d+/)[0]) - Number(b.match(/\d+/)[0]))
const decode = s => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&')
console.log(`${slides.length} slides`)
slides.forEach((name, i) => {
  const xml = run(['-p', file, name])
  const paragraphs = xml.split('</a:p>').map(p => [...p.matchAll(/<a:t>([^<]*)<\/a:t>/g)].map(m => decode(m[1])).join('')).filter(Boolean)
  console.log(`--- slide ${i + 1}`)
  for (const p of paragraphs) console.log(p)
})
