/*
 * archive amplification over a real socket. One archive per chat and a global limit
 * (429 with Retry-After after a short wait), and a reader that stops reading cannot keep a descriptor of
 * the outputs dir or an archive slot: a client that goes away closes them at once, a stalled one is cut off.
 */
import t from 'tap'
import type { Test } from 'tap'
import { randomFillSync } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { request, type ClientRequest, type IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { entry } from '../../core/app.js'
import { chatPaths } from '../../core/chat-paths.js'
import capabilities from '../../plugins/capabilities/index.js'
import files from '../../plugins/files/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import type { FilesOptions } from '../../plugins/files/schemas.js'
import { listen, TEST_API_KEY } from '../helper.js'
import { readZip } from '../plugins/files/zip-reader.js'

const KEY = TEST_API_KEY
const MIB = 1024 * 1024
// Stored (.mp4), incompressible and larger than loopback socket buffers: the archive cannot finish unread.
const BIG = 24 * MIB

async function server (t: Test, options: Partial<FilesOptions>): Promise<{ url: string, outputs: (chat: string) => string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-archive-limits-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const data = randomFillSync(Buffer.alloc(BIG))
  for (const chat of ['chat-a', 'chat-b']) {
    const dir = chatPaths(dataDir, chat).outputs
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'video.mp4'), data)
  }
  const { url } = await listen(t, { DATA_DIR: dataDir, MCP_API_KEY: KEY }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: '', tokenTtlSeconds: 86400, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, { archiveWaitMs: 300, ...options })
  ])
  return { url, outputs: chat => realpathSync(chatPaths(dataDir, chat).outputs) }
}

/** Starts an archive download and stops reading once the headers are in. */
async function stalled (url: string, chat: string): Promise<{ req: ClientRequest, res: IncomingMessage }> {
  return await new Promise((resolve, reject) => {
    const req = request(`${url}/files/${chat}/archive`, { headers: { authorization: `Bearer ${KEY}` } }, res => {
      res.pause()
      resolve({ req, res })
    })
    req.on('error', reject).end()
  })
}

async function fetchArchive (url: string, chat: string): Promise<{ status: number, headers: Record<string, unknown>, body: Buffer }> {
  const res = await fetch(`${url}/files/${chat}/archive`, { headers: { authorization: `Bearer ${KEY}` } })
  return { status: res.status, headers: Object.fromEntries(res.headers), body: Buffer.from(await res.arrayBuffer()) }
}

/** Descriptors of this process that point into `dir` (the server runs in this process). */
function openBelow (dir: string): number {
  let n = 0
  for (const fd of readdirSync('/proc/self/fd')) {
    try { if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(`${dir}/`)) n++ } catch {}
  }
  return n
}

async function until (what: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) if (what()) return true
  return what()
}

t.test('one archive per chat: a second one waits, then 429 archive_in_progress; a client that leaves frees it at once', async t => {
  const { url, outputs } = await server(t, {})
  const first = await stalled(url, 'chat-a')
  t.equal(first.res.statusCode, 200)
  t.ok(await until(() => openBelow(outputs('chat-a')) === 1, 2000), 'the streaming archive holds one descriptor')
  const started = Date.now()
  const second = await fetchArchive(url, 'chat-a')
  t.equal(second.status, 429)
  t.ok(Date.now() - started >= 250, 'it waited (archiveWaitMs) before giving up')
  t.equal(second.headers['retry-after'], '10')
  t.same(JSON.parse(second.body.toString()), {
    error: 'archive_in_progress', detail: 'an archive of this chat is already being downloaded; retry in 10 s, when it has finished', retry_after: 10
  })
  t.equal((await fetchArchive(url, 'chat-b')).status, 200, 'another chat is not limited by it')
  first.req.destroy()
  t.ok(await until(() => openBelow(outputs('chat-a')) === 0, 2000), 'the descriptor is closed when the client goes away')
  const third = await fetchArchive(url, 'chat-a')
  t.equal(third.status, 200, 'and the chat can download again')
  t.same(readZip(third.body).map(e => [e.name, e.size]), [['video.mp4', BIG]])
})

t.test('a global limit across chats: 429 server_busy after the wait, free again when the first ends', async t => {
  const { url } = await server(t, { archivesMax: 1 })
  const first = await stalled(url, 'chat-a')
  const busy = await fetchArchive(url, 'chat-b')
  t.equal(busy.status, 429)
  t.equal(busy.headers['retry-after'], '10')
  t.equal(JSON.parse(busy.body.toString()).error, 'server_busy')
  first.req.destroy()
  let status = 0
  for (const end = Date.now() + 5000; status !== 200 && Date.now() < end;) status = (await fetchArchive(url, 'chat-b')).status
  t.equal(status, 200, 'the global slot came back when the first client went away')
})

t.test('a reader that stops reading is cut off by the watchdog; descriptor and slot come back', async t => {
  const { url, outputs } = await server(t, { archiveStallMs: 1000 })
  const { res } = await stalled(url, 'chat-a')
  t.ok(await until(() => openBelow(outputs('chat-a')) === 1, 2000), 'streaming, one descriptor open')
  t.ok(await until(() => openBelow(outputs('chat-a')) === 0, 8000), 'the server cut the stalled download off and closed its descriptor')
  // Reading again now drains what the sockets buffered, then meets the cut: never the whole archive.
  const received = await new Promise<number>(resolve => {
    let bytes = 0
    res.on('data', (c: Buffer) => { bytes += c.length })
    res.on('close', () => { resolve(bytes) })
    res.resume()
  })
  t.ok(received < BIG, `the client got ${(received / MIB).toFixed(1)} MiB of ${BIG / MIB} MiB, then the end`)
  const again = await fetchArchive(url, 'chat-a')
  t.equal(again.status, 200, 'the chat slot was released')
  t.equal(readZip(again.body)[0]?.size, BIG, 'a reader that keeps reading gets the whole archive under the same watchdog')
})
