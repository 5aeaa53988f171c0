/*
 * `npm run docs`: writes the generated reference pages, docs/settings.md (from the config schema) and
 * docs/routes.md (from the OpenAPI document). `--check` writes nothing and exits 1 when a committed
 * page differs from what the code generates (test/core/docs.test.ts does the same).
 */
import { readFile, writeFile } from 'node:fs/promises'
import { settingsDoc } from './docs/settings.js'
import { routesDoc } from './docs/routes.js'

const root = new URL('../', import.meta.url)
const pages: Array<[path: string, render: () => string | Promise<string>]> = [
  ['docs/settings.md', settingsDoc],
  ['docs/routes.md', routesDoc]
]

const check = process.argv.includes('--check')
let stale = 0
for (const [path, render] of pages) {
  const text = await render()
  const current = await readFile(new URL(path, root), 'utf8').catch(() => '')
  if (current === text) { console.log(`${path}: up to date`); continue }
  if (check) { stale++; console.log(`${path}: stale, run npm run docs`); continue }
  await writeFile(new URL(path, root), text)
  console.log(`${path}: written`)
}
// The measured app's plugins may hold timers a little longer than close(); the work is done.
process.exit(stale === 0 ? 0 : 1)
