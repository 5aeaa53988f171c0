/*
 * `npx tsx scripts/render-icons.ts`: renders each plugins/icons/public/<name>.svg to <name>.png
 * (128x128, transparent corners) in Chromium, because MCP clients must support PNG but need not
 * support SVG (docs/contract.md#icons). Run it after changing an SVG and commit both files;
 * test/plugins/icons/icons.test.ts fails while a PNG is missing or of the wrong size.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises'
import { chromium } from 'playwright-core'
import { PNG_SIZE } from '../plugins/icons/icons.js'

const dir = new URL('../plugins/icons/public/', import.meta.url)
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium' })
try {
  const page = await browser.newPage({ viewport: { width: PNG_SIZE, height: PNG_SIZE } })
  for (const file of (await readdir(dir)).filter(f => f.endsWith('.svg')).sort()) {
    const svg = await readFile(new URL(file, dir), 'utf8')
    await page.setContent(`<html><body style="margin:0;background:transparent"><img style="display:block;width:${PNG_SIZE}px;height:${PNG_SIZE}px" src="data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}"></body></html>`)
    await page.waitForFunction('document.images[0].complete')
    const png = await page.screenshot({ omitBackground: true, clip: { x: 0, y: 0, width: PNG_SIZE, height: PNG_SIZE } })
    await writeFile(new URL(file.replace(/\.svg$/, '.png'), dir), png)
    console.log(`${file} → ${file.replace(/\.svg$/, '.png')} (${png.length} bytes)`)
  }
} finally { await browser.close() }
