// Runs ESLint for test/lint/boundaries.test.ts in a plain Node process (tsx's loader, which the tests run
// under, breaks the resolution of some of ESLint's ESM dependencies). Lints each probe (argv[2], JSON of
// { [name]: { file, code } }) as if it were that file and prints { probes: { [name]: ruleIds[] } }.
// The whole tree is linted by `npm run lint`, not here.
import { fileURLToPath } from 'node:url'
import { ESLint } from 'eslint'

const root = fileURLToPath(new URL('../..', import.meta.url))
const eslint = new ESLint({ cwd: root })
const probes = JSON.parse(process.argv[2] ?? '{}')
const out = { probes: {} }
for (const [name, { code, file }] of Object.entries(probes)) {
  out.probes[name] = (await eslint.lintText(code, { filePath: `${root}${file}` })).flatMap(r => r.messages.map(m => m.ruleId ?? 'fatal'))
}
process.stdout.write(JSON.stringify(out))
