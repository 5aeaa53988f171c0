// Runs the whole tap suite and ends with the plain line CI reads: "N passed, M failed".
// tap closes with "# { total: N, pass: N, fail: N, skip: N }", which is parsed here.
import { spawn } from 'node:child_process'

const child = spawn('npx', ['tap', ...process.argv.slice(2)], { stdio: ['ignore', 'pipe', 'inherit'], env: process.env })
let tail = ''
child.stdout.on('data', chunk => {
  process.stdout.write(chunk)
  tail = (tail + chunk.toString('utf8')).slice(-4096)
})
child.on('close', code => {
  const summary = /#\s*\{([^}]*)\}\s*(?:#[^\n]*)?\s*$/m.exec(tail.split('\n').filter(l => l.includes('total:')).pop() ?? '')
  const count = key => Number(new RegExp(`${key}:\\s*(\\d+)`).exec(summary?.[1] ?? '')?.[1] ?? 0)
  const passed = count('pass')
  let failed = count('fail')
  if (code !== 0 && failed === 0) failed = 1 // a crash or a failure tap did not count
  console.log(`\n${passed} passed, ${failed} failed, ${count('skip')} skipped`)
  process.exit(code ?? 1)
})
