// Runs ESLint for test/lint/lint.test.ts in a plain Node process (tsx's loader, which the tests run under,
// breaks the resolution of some of ESLint's ESM dependencies). Prints one JSON object on stdout:
// { probes: { [name]: ruleIds[] }, findings: string[] }.
import { fileURLToPath } from 'node:url'
import { ESLint } from 'eslint'

const root = fileURLToPath(new URL('../..', import.meta.url))
const eslint = new ESLint({ cwd: root })
const probes = JSON.parse(process.argv[2] ?? '{}')
const out = { probes: {}, findings: [] }
for (const [name, { code, file }] of Object.entries(probes)) {
  out.probes[name] = (await eslint.lintText(code, { filePath: `${root}${file}` })).flatMap(r => r.messages.map(m => m.ruleId ?? 'fatal'))
}
if (process.argv[3] === 'tree') {
  for (const r of await eslint.lintFiles(['.'])) {
    for (const m of r.messages) out.findings.push(`${r.filePath.slice(root.length)}:${m.line}:${m.column} ${m.ruleId ?? 'fatal'} ${m.message}`)
  }
}
process.stdout.write(JSON.stringify(out))
