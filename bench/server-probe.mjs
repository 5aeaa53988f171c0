/*
 * Preloaded into the benched server (--import; bench/common.ts starts it with an IPC channel). Plain
 * JavaScript, so that the built server (node dist/core/server.js, as deployed) needs no TypeScript
 * loader. Answers the bench's questions about the server from inside, so that profiles are measured,
 * not guessed (message types: bench/probe-types.ts):
 *   memory            RSS, V8 heap by space, external and array buffers, active handles
 *   heap              writes a heap snapshot (bench/heap-summary.ts reads it)
 *   cpu-start/stop    V8 CPU profile of the server over a window (bench/cpu.ts summarizes it)
 *   trace-start/stop  timestamps of every HTTP request the server sends (the Docker API, with the Cmd
 *                     of exec creates; for hijacked exec streams also when the upgrade, the first bytes
 *                     and the end arrived) and of every request it serves (with X-Chat-Id)
 * Times are absolute milliseconds (performance.timeOrigin + performance.now()), the bench's clock too.
 */
import diagnostics from 'node:diagnostics_channel'
import http from 'node:http'
import { Session } from 'node:inspector'
import { writeFileSync } from 'node:fs'
import v8 from 'node:v8'

const at = () => performance.timeOrigin + performance.now()
let tracing = null
const byRequest = new WeakMap()

function watchSocket (ev, sock, head) {
  ev.upgrade = at()
  if (head.length > 0) ev.firstData = ev.upgrade
  // Patching emit observes the stream without changing its flow mode (a 'data' listener would).
  const emit = sock.emit.bind(sock)
  sock.emit = (name, ...args) => {
    if (name === 'data' && ev.firstData === undefined) ev.firstData = at()
    if ((name === 'end' || name === 'close') && ev.streamEnd === undefined) ev.streamEnd = at()
    return emit(name, ...args)
  }
}

function traceClient (request) {
  if (tracing === null) return
  const ev = { kind: 'client', method: request.method, path: request.path, start: at() }
  tracing.push(ev)
  if (request.method === 'POST' && /\/exec$/.test(request.path.split('?')[0] ?? '')) {
    // Never throws into the server's own write (a Cmd may hold any text).
    const sniff = chunk => {
      if (ev.cmd !== undefined || (typeof chunk !== 'string' && !Buffer.isBuffer(chunk))) return
      try {
        const cmd = JSON.parse(chunk.toString()).Cmd
        if (Array.isArray(cmd)) ev.cmd = cmd.slice(0, 3).join(' ')
      } catch {}
    }
    const write = request.write.bind(request)
    request.write = (chunk, ...rest) => { sniff(chunk); return write(chunk, ...rest) }
    const end = request.end.bind(request)
    request.end = (chunk, ...rest) => { sniff(chunk); return end(chunk, ...rest) }
  }
  request.prependListener('response', res => { ev.end = at(); ev.status = res.statusCode })
  request.prependListener('upgrade', (_res, sock, head) => { watchSocket(ev, sock, head) })
}

// Patched at the call, not observed through diagnostics_channel: that channel publishes a client
// request only when its body is finished, which a hijacked exec with stdin (the agent's stream) never is.
const request = http.request.bind(http)
http.request = (...args) => {
  const req = request(...args)
  try { traceClient(req) } catch {}
  return req
}

diagnostics.subscribe('http.server.request.start', ({ request, response }) => {
  if (tracing === null) return
  const chat = request.headers['x-chat-id']
  const ev = { kind: 'server', method: request.method ?? '', path: request.url ?? '', start: at(), ...(typeof chat === 'string' && { chat }) }
  tracing.push(ev)
  byRequest.set(response, ev)
})
diagnostics.subscribe('http.server.response.finish', ({ response }) => {
  const ev = byRequest.get(response)
  if (ev !== undefined) { ev.end = at(); ev.status = response.statusCode }
})

let session = null
const post = async (method, params = {}) => await new Promise((resolve, reject) => {
  session?.post(method, params, (err, result) => { if (err !== null) reject(err); else resolve(result) })
})

async function answer (req) {
  switch (req.op) {
    case 'memory': {
      const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map(s => [s.space_name, s.space_used_size]))
      return { ...process.memoryUsage(), spaces, handles: process._getActiveHandles().length }
    }
    case 'heap': return { file: v8.writeHeapSnapshot(req.file) }
    case 'cpu-start':
      session = new Session()
      session.connect()
      await post('Profiler.enable')
      // BENCH_CPU_INTERVAL_US: a finer sampling interval than V8's default (1000 µs), for short windows.
      if (process.env.BENCH_CPU_INTERVAL_US !== undefined) await post('Profiler.setSamplingInterval', { interval: Number(process.env.BENCH_CPU_INTERVAL_US) })
      await post('Profiler.start')
      return {}
    case 'cpu-stop': {
      const { profile } = await post('Profiler.stop')
      session?.disconnect()
      session = null
      writeFileSync(req.file, JSON.stringify(profile))
      return { file: req.file }
    }
    case 'trace-start': tracing = []; return {}
    case 'trace-stop': { const events = tracing ?? []; tracing = null; return { events } }
    default: throw new Error(`unknown op ${String(req.op)}`)
  }
}

if (process.send !== undefined) {
  process.on('message', req => {
    answer(req).then(result => { process.send?.({ seq: req.seq, ok: true, result }) },
      err => { process.send?.({ seq: req.seq, ok: false, error: String(err) }) })
  })
  // The channel must not keep the server alive after its own shutdown.
  process.channel?.unref()
}
