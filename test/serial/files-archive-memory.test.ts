/*
 * The archive streams: zipping 384 MiB of outputs over a real socket must not grow the process's memory
 * with the archive size. 384 MiB is three times the bound; what the process grows by does not follow the
 * archive (81.5 MiB for 512 MiB, 87.5 MiB for 384 MiB, measured), an archive held in memory would add all
 * of it. Numbers are written to test-artifacts/archive-memory.json and printed as a comment.
 */
import t from 'tap'
import { randomFillSync } from 'node:crypto'
import { mkdirSync, mkdtempSync, openSync, closeSync, rmSync, writeSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { entry } from '../../core/app.js'
import { chatPaths } from '../../core/chat-paths.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import { listen, TEST_API_KEY } from '../helper.js'

const MIB = 1024 * 1024
const FILES = 16
const FILE_MIB = Number(process.env.ARCHIVE_MEMORY_FILE_MIB ?? 24)

t.test('zipping 384 MiB of outputs keeps memory flat', async t => {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-zipmem-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const outputs = chatPaths(dataDir, 'big').outputs
  mkdirSync(outputs, { recursive: true })
  const chunk = randomFillSync(Buffer.alloc(MIB))
  for (let i = 0; i < FILES; i++) {
    // Half deflated (.bin), half stored (.mp4): both code paths of the archive.
    const fd = openSync(join(outputs, `part-${i}.${i % 2 === 0 ? 'bin' : 'mp4'}`), 'w')
    for (let m = 0; m < FILE_MIB; m++) { chunk[0] = m; chunk[1] = i; writeSync(fd, chunk) }
    closeSync(fd)
  }
  const { url } = await listen(t, { DATA_DIR: dataDir, MCP_API_KEY: TEST_API_KEY, ARCHIVE_MAX_BYTES: '1g' }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, { archiveMaxBytes: config.ARCHIVE_MAX_BYTES })
  ])
  global.gc?.()
  const baseline = process.memoryUsage().rss
  let peak = baseline
  const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss) }, 50)
  const started = Date.now()
  const { bytes, tail, status } = await new Promise<{ bytes: number, tail: Buffer, status: number }>((resolve, reject) => {
    request(`${url}/files/big/archive`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } }, res => {
      let bytes = 0
      let tail = Buffer.alloc(0)
      res.on('data', (c: Buffer) => { bytes += c.length; tail = Buffer.concat([tail, c]).subarray(-65536) })
      res.on('end', () => resolve({ bytes, tail, status: res.statusCode ?? 0 }))
      res.on('error', reject)
    }).on('error', reject).end()
  })
  clearInterval(sampler)
  const seconds = (Date.now() - started) / 1000
  const growthMiB = (peak - baseline) / MIB
  const numbers = { inputMiB: FILES * FILE_MIB, zipMiB: +(bytes / MIB).toFixed(1), seconds, baselineRssMiB: +(baseline / MIB).toFixed(1), peakRssMiB: +(peak / MIB).toFixed(1), growthMiB: +growthMiB.toFixed(1) }
  mkdirSync(new URL('../../test-artifacts/', import.meta.url), { recursive: true })
  writeFileSync(new URL('../../test-artifacts/archive-memory.json', import.meta.url), JSON.stringify(numbers, null, 2))
  t.comment(`archive memory: ${JSON.stringify(numbers)}`)
  t.equal(status, 200)
  t.ok(bytes > FILES * FILE_MIB * MIB * 0.99, 'random data does not shrink: the whole input went through')
  const eocd = tail.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]))
  t.ok(eocd >= 0, 'the stream ends with a zip directory')
  t.equal(tail.readUInt16LE(eocd + 10), FILES, 'every file is in it')
  t.ok(growthMiB < 128, `RSS grew ${growthMiB.toFixed(1)} MiB for a ${FILES * FILE_MIB} MiB archive`)
})
