/*
 * (k) App preview URLs (docs/features.md#app-preview-urls), against an app the chat starts in its sandbox
 * (test/fixtures/web-app.ts):
 *   - a small answer through `/apps/<chat>/3000/small` (the app listens on 0.0.0.0, so the server takes its direct
 *     route; the line says which it took; keep-alive both ways, as a browser does; Node's http client everywhere,
 *     fetch's time for information) ÷ the same request sent directly from inside the sandbox over loopback by a
 *     warmed-up client (the goal's divisor, ≤ 2: what the app costs where it runs), and for information by a new
 *     client process (its first requests) and from the host to the sandbox's address (what a published port would
 *     give); alternated in rounds so that load drift hits all alike;
 *   - a WebSocket opened through the proxy and one message echoed, each on a new connection into the
 *     sandbox (straight to its address, proven by an engine inspect; else the in-sandbox agent's CONNECT, or an
 *     exec relay on images without it), for information;
 *   - 1 GB downloaded through the proxy: throughput and the server's RSS growth (goal: bounded, ≤ 64 MiB).
 */
import { Agent, get } from 'node:http'
import { loadavg } from 'node:os'
import WebSocket from 'ws'
import { startApp } from '../test/fixtures/web-app.js'
import { BASE, bash, chatContainer, client, median, ms, now, rssMiB, sleep, type Server } from './common.js'

const ROUNDS = 10
const PER_ROUND = 30
/** untimed requests before each round's timed ones from inside the sandbox (insideScript) */
const WARM = 100
const DOWNLOAD = 1_000_000_000

const keepAlive = new Agent({ keepAlive: true })

/**
 * Times in ms of `n` sequential GETs of `url` with Node's http client on a kept-alive connection: the
 * client of the divisor (insideScript), so that the ratio compares the paths, not two clients (fetch
 * adds 0.2–0.5 ms here: `viaFetch`).
 */
async function timeGets (url: string, n: number, viaFetch = false): Promise<number[]> {
  const times: number[] = []
  for (let i = 0; i < n; i++) {
    const t0 = now()
    if (viaFetch) {
      const res = await fetch(url)
      await res.arrayBuffer()
      if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`)
    } else {
      await new Promise<void>((resolve, reject) => {
        get(url, { agent: keepAlive }, res => {
          res.resume()
          res.once('end', () => { if (res.statusCode === 200) resolve(); else reject(new Error(`${url}: HTTP ${res.statusCode ?? 0}`)) })
        }).once('error', reject)
      })
    }
    times.push(now() - t0)
  }
  return times
}

/**
 * The same from inside the sandbox: a Node client on loopback with keep-alive, per-request times in ms of `n`
 * requests after `warm` untimed ones. A new node process runs each round: its first requests pay the client's
 * warm-up (0.3–0.4 ms a request where a warm client takes 0.2 ms), which the proxied side, timed from a warm
 * process, does not.
 */
export const insideScript = (n: number, warm = 0): string => `node -e "
const http = require('http'); const agent = new http.Agent({ keepAlive: true }); let out = []
const one = () => new Promise((ok, ko) => { const t0 = process.hrtime.bigint(); http.get({ host: '127.0.0.1', port: 3000, path: '/small', agent }, r => { r.resume(); r.on('end', () => { out.push(Number(process.hrtime.bigint() - t0) / 1e6); ok() }) }).on('error', ko) })
;(async () => { for (let i = 0; i < ${warm}; i++) await one(); out = []; for (let i = 0; i < ${n}; i++) await one(); console.log(JSON.stringify(out)) })()"`

export interface AppsResult { lines: string[], ratio: number, rssGrowth: number }

export async function benchApps (server: Server): Promise<AppsResult> {
  const c = await client('bench-k')
  await bash(c, startApp(3000))
  const info = await chatContainer('bench-k')
  const address = Object.values(info?.NetworkSettings.Networks ?? {})[0]?.IPAddress ?? ''
  const proxied: number[] = []
  const fetched: number[] = []
  const direct: number[] = []
  const inside: number[] = []
  const insideCold: number[] = []
  const proxyUrl = `${BASE}/apps/bench-k/3000/small`
  await timeGets(proxyUrl, 20) // the pooled connections exist: the first exec relays are not what is measured
  await timeGets(proxyUrl, 20, true)
  // Which route the server took (docs/features.md#the-direct-route): the app's peer is the server on the sandbox network, or loopback through the agent.
  const peer = ((await (await fetch(`${BASE}/apps/bench-k/3000/headers`)).json()) as { peer?: string }).peer ?? '?'
  const route = peer === '127.0.0.1' || peer === '::1' ? 'the agent\'s relay' : `the direct route (the app's peer ${peer})`
  const directUrl = address === '' ? '' : `http://${address}:3000/small`
  let directReachable = directUrl !== ''
  for (let round = 0; round < ROUNDS; round++) {
    proxied.push(...await timeGets(proxyUrl, PER_ROUND))
    fetched.push(...await timeGets(proxyUrl, PER_ROUND, true))
    if (directReachable) {
      try { direct.push(...await timeGets(directUrl, PER_ROUND)) } catch { directReachable = false }
    }
    inside.push(...JSON.parse((await bash(c, insideScript(PER_ROUND, WARM))).trim().split('\n')[0] ?? '[]') as number[])
    insideCold.push(...JSON.parse((await bash(c, insideScript(PER_ROUND))).trim().split('\n')[0] ?? '[]') as number[])
  }
  const [p, d, i] = [median(proxied), median(direct), median(inside)]
  const ratio = p / i
  const ms2 = (x: number): string => `${x.toFixed(2)} ms`
  const lines = [`(k) small answer through /apps/… ${ms2(p)} ÷ the same from inside the sandbox over loopback ${ms2(i)} = ${ratio.toFixed(2)}` +
    ` (goal ≤ 2; a client warmed up by ${WARM} requests, as the proxied side's is; ÷ a new process's first ${PER_ROUND} ${ms2(median(insideCold))} = ${(p / median(insideCold)).toFixed(2)});` +
    ` ÷ direct from the host to the sandbox's address ${directReachable ? `${ms2(d)} = ${(p / d).toFixed(2)}` : 'unreachable'}` +
    ` (${proxied.length} requests each, median, Node's http client); through /apps/… with fetch ${ms(median(fetched))};` +
    ` the server took ${route}; load ${loadavg()[0]?.toFixed(1) ?? '?'}`]

  // New connections into the sandbox: a WebSocket each (HTTP requests reuse the pooled ones).
  const opens: number[] = []
  for (let i = 0; i < 10; i++) {
    const t0 = now()
    const ws = new WebSocket(`${BASE.replace('http:', 'ws:')}/apps/bench-k/3000/ws`)
    await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
    ws.send('x')
    await new Promise(resolve => ws.once('message', resolve))
    opens.push(now() - t0)
    ws.close()
    await new Promise(resolve => ws.once('close', resolve))
  }
  lines.push(`(k) a WebSocket through /apps/… opened and echoed once, on a new connection into the sandbox: ${ms(median(opens))} (10, median)`)

  // 1 GB through the proxy, read as fast as the client can; the server's RSS sampled meanwhile.
  const pid = server.child.pid ?? 0
  const before = rssMiB(pid)
  let peak = before
  const sampler = setInterval(() => { peak = Math.max(peak, rssMiB(pid)) }, 100)
  const t0 = now()
  let got = 0
  try {
    const res = await fetch(`${BASE}/apps/bench-k/3000/bytes?n=${DOWNLOAD}`)
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      got += value.byteLength
    }
  } finally { clearInterval(sampler) }
  const seconds = (now() - t0) / 1000
  await sleep(200)
  const rssGrowth = peak - before
  lines.push(`(k) ${(got / 1e9).toFixed(2)} GB through /apps/… in ${seconds.toFixed(1)} s (${(got / 1e6 / seconds).toFixed(0)} MB/s); server RSS ${before.toFixed(0)} → peak ${peak.toFixed(0)} MiB (+${rssGrowth.toFixed(0)} MiB, goal ≤ 64)`)
  if (got !== DOWNLOAD) lines.push(`(k) download incomplete: ${got} of ${DOWNLOAD} bytes`)
  await c.close()
  return { lines, ratio, rssGrowth }
}
