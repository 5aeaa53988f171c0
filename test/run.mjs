// Runs the whole tap suite and ends with the plain line CI reads: "N passed, M failed".
import { spawn } from 'node:child_process'

const args = ['tap', '--reporter=tap', ...process.argv.slice(2)]
const child = spawn('npx', args, { stdio: ['ignore', 'pipe', 'inherit'], env: process.env })
let pass = 0
let fail = 0
let skip = 0
let buffer = ''
child.stdout.on('data', chunk => {
  process.stdout.write(chunk)
  buffer += chunk.toString('utf8')
  let nl
  while ((nl = buffer.indexOf('\n')) !== -1) {
    const line = buffer.slice(0, nl)
    buffer = buffer.slice(nl + 1)
    // Count leaf assertions at any depth; subtest summary lines ("ok 1 - file.ts # time=") are counted too,
    // so only lines without nested children are counted: tap prints "# Subtest" before parents.
    const m = /^\s*(not ok|ok) \d+/.exec(line)
    if (m === null) continue
    if (/# SKIP/i.test(line)) skip++
    else if (m[1] === 'ok') pass++
    else if (!/# TODO/i.test(line)) fail++
  }
})
child.on('close', code => {
  if (code !== 0 && fail === 0) fail = 1
  console.log(`\n${pass} passed, ${fail} failed, ${skip} skipped`)
  process.exit(code ?? 1)
})
