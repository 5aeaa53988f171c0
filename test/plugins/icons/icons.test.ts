/*
 * The icon files (docs/contract.md#icons): each name has an SVG and a PNG of the advertised size, and
 * the SVGs are plain drawings (no script, no outside reference), since a client may open them directly.
 */
import { readFile } from 'node:fs/promises'
import t from 'tap'
import { ICON_NAMES, iconsOf, PNG_SIZE, SERVER_ICON, serverIcons } from '../../../plugins/icons/icons.js'

const file = (name: string): URL => new URL(`../../../plugins/icons/public/${name}`, import.meta.url)

t.test('every icon has an SVG and a PNG of PNG_SIZE (scripts/render-icons.ts renders them)', async t => {
  for (const name of ICON_NAMES) {
    const png = await readFile(file(`${name}.png`))
    t.same(png.subarray(0, 8), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), `${name}.png is a PNG`)
    t.same([png.readUInt32BE(16), png.readUInt32BE(20)], [PNG_SIZE, PNG_SIZE], `${name}.png is ${PNG_SIZE}x${PNG_SIZE}`)
    const svg = await readFile(file(`${name}.svg`), 'utf8')
    t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" viewBox="0 0 64 64"/, `${name}.svg`)
    t.notMatch(svg, /<script|on[a-z]+=|href|url\(/i, `${name}.svg references nothing and runs nothing`)
  }
})

t.test('icons are absolute URLs below the public base URL, PNG first', async t => {
  t.same(iconsOf('https://c.example/', 'view'), [
    { src: 'https://c.example/icons/view.png', mimeType: 'image/png', sizes: [`${PNG_SIZE}x${PNG_SIZE}`] },
    { src: 'https://c.example/icons/view.svg', mimeType: 'image/svg+xml', sizes: ['any'] }
  ])
  t.same(serverIcons('https://c.example/base'), iconsOf('https://c.example/base', SERVER_ICON))
  t.equal(serverIcons('https://c.example/base')[0]?.src, 'https://c.example/base/icons/cubicle.png')
})
