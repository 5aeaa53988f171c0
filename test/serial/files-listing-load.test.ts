/*
 * 100 parallel listings of a 100,000-file outputs dir (the sandbox holds a files token, so
 * it can send them) must not multiply the server's memory, must still answer the correct newest 5,000, and
 * must leave another chat's listing answering meanwhile. The server runs in its own process
 * (test/fixtures/files-server.ts) so that its RSS is measured without this test's client buffers. Numbers are written to
 * test-artifacts/listing-load.json and printed as a comment.
 */
import t from 'tap'
import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, futimesSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { chatPaths } from '../../core/chat-paths.js'
import { TEST_API_KEY } from '../helper.js'

const MIB = 1024 * 1024
const FILES = Number(process.env.LISTING_LOAD_FILES ?? 100_000)
const PARALLEL = 100
const SHOWN = 5000
const RSS_BOUND_MIB = 150
const KEY = TEST_API_KEY
const BASE_MTIME = 1_600_000_000
const root = fileURLToPath(new URL('../..', import.meta.url))

// A permutation of 0…FILES-1 (7919 is prime and does not divide FILES), so name order ≠ mtime order.
const rank = (i: number): number => (i * 7919) % FILES

function rssMiB (pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024
}

async function startServer (dataDir: string): Promise<{ child: ChildProcess, url: string }> {
  const child = spawn(process.execPath, ['--import=tsx', 'test/fixtures/files-server.ts'], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
    // A generous time budget: this test checks that a complete walk of 100k files answers the right top 5,000.
    env: { ...process.env, DATA_DIR: dataDir, MCP_API_KEY: KEY, FILES_OPTIONS: JSON.stringify({ walkBudgetMs: 600_000 }) }
  })
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once('line', resolve)
    child.once('exit', code => reject(new Error(`server exited with ${String(code)}`)))
  })
  return { child, url: (JSON.parse(line) as { url: string }).url }
}

/** GET a listing; keeps the body only when asked (the 100 parallel ones are counted, not stored). */
async function get (url: string, keep: boolean): Promise<{ status: number, bytes: number, body?: string, ms: number }> {
  const started = performance.now()
  return await new Promise((resolve, reject) => {
    request(url, { headers: { authorization: `Bearer ${KEY}` } }, res => {
      const chunks: Buffer[] = []
      let bytes = 0
      res.on('data', (c: Buffer) => { bytes += c.length; if (keep) chunks.push(c) })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, body: keep ? Buffer.concat(chunks).toString() : undefined, ms: performance.now() - started }))
      res.on('error', reject)
    }).on('error', reject).end()
  })
}

t.test('100 parallel listings of a 100k-file outputs dir: bounded RSS, right answer, other chat unaffected', async t => {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-listing-load-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const huge = chatPaths(dataDir, 'huge').outputs
  mkdirSync(huge, { recursive: true })
  for (let i = 0; i < FILES; i++) {
    const fd = openSync(join(huge, `file-${String(i).padStart(6, '0')}.txt`), 'w')
    futimesSync(fd, BASE_MTIME + rank(i), BASE_MTIME + rank(i))
    closeSync(fd)
  }
  const small = chatPaths(dataDir, 'small').outputs
  mkdirSync(small, { recursive: true })
  writeFileSync(join(small, 'note.txt'), 'hello')

  const { child, url } = await startServer(dataDir)
  t.teardown(() => { child.kill('SIGTERM') })
  const pid = child.pid as number
  for (let i = 0; i < 3; i++) await get(`${url}/api/outputs/small`, false) // warm the routes up
  const baseline = rssMiB(pid)
  let peak = baseline
  const sampler = setInterval(() => { peak = Math.max(peak, rssMiB(pid)) }, 20)

  let bigDone = 0
  const started = performance.now()
  const parallel = Array.from({ length: PARALLEL }, async (_, n) => {
    const r = await get(`${url}/api/outputs/huge`, n === 0)
    bigDone++
    return r
  })
  await new Promise(resolve => setTimeout(resolve, 100))
  const other = await get(`${url}/api/outputs/small`, true)
  const otherWhileBig = bigDone === 0
  const answers = await Promise.all(parallel)
  const wallMs = performance.now() - started
  clearInterval(sampler)
  peak = Math.max(peak, rssMiB(pid))

  const growth = peak - baseline
  const numbers = {
    files: FILES,
    parallel: PARALLEL,
    wallSeconds: +(wallMs / 1000).toFixed(2),
    bodyMiB: +((answers[0]?.bytes ?? 0) / MIB).toFixed(2),
    baselineRssMiB: +baseline.toFixed(1),
    peakRssMiB: +peak.toFixed(1),
    growthMiB: +growth.toFixed(1),
    otherChatMs: +other.ms.toFixed(1)
  }
  mkdirSync(new URL('../../test-artifacts/', import.meta.url), { recursive: true })
  writeFileSync(new URL('../../test-artifacts/listing-load.json', import.meta.url), JSON.stringify(numbers, null, 2))
  t.comment(`listing load: ${JSON.stringify(numbers)}`)

  t.ok(answers.every(a => a.status === 200), 'every listing answered 200')
  t.equal(new Set(answers.map(a => a.bytes)).size, 1, 'all 100 got the same listing')
  const body = JSON.parse(answers[0]?.body ?? '{}') as { total: number, truncated?: boolean, files: Array<{ path: string, modified: number }> }
  t.equal(body.total, SHOWN)
  t.equal(body.truncated, true)
  const expected = Array.from({ length: FILES }, (_, i) => i).filter(i => rank(i) >= FILES - SHOWN)
    .sort((a, b) => rank(b) - rank(a)).map(i => `file-${String(i).padStart(6, '0')}.txt`)
  t.same(body.files.map(f => f.path), expected, 'exactly the newest 5,000, newest first')
  t.equal(other.status, 200)
  t.equal((JSON.parse(other.body ?? '{}') as { files: unknown[] }).files.length, 1)
  t.ok(otherWhileBig, 'the other chat answered while the big listings were still running')
  // Measured 0.5–0.8 s on a loaded 2-core machine (the code before the walk was bounded: 14.6 s at only 20k files).
  t.ok(other.ms < 2000, `the other chat answered in ${other.ms.toFixed(0)} ms (< 2 s)`)
  t.ok(growth < RSS_BOUND_MIB, `server RSS grew ${growth.toFixed(1)} MiB (bound ${RSS_BOUND_MIB} MiB)`)
})
