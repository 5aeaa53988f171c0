import http from 'node:http'
import https from 'node:https'
import WebSocket from 'ws'
import type { KubeConnection } from './kube-config.js'
import { KubeError, networkError, statusError } from './kube-error.js'

/*
 * A small typed client of the Kubernetes API over HTTP and WebSocket (docs/engine.md#kubernetes): JSON
 * requests with a time-out and a bounded answer, watches as JSON lines with a bounded line, and the
 * WebSocket upgrade of pods/exec. Every failure is a KubeError (kube-error.ts). Chosen over
 * @kubernetes/client-node: the engine needs a handful of calls, an exec whose promise settles on the
 * process's exit (client-node's resolves when the stream opens) and byte budgets on everything the
 * API and the pods send; client-node 2.x also needs a newer Node than this project supports.
 */

const DEFAULT_TIMEOUT_MS = 30_000
/** An answer larger than this is refused (a list is paged well below it). */
const MAX_ANSWER = 8 * 1024 * 1024
/** A watch event larger than this ends the watch (an object is at most ~1.5 MiB in etcd). */
const MAX_WATCH_LINE = 4 * 1024 * 1024

/** How many times a request goes again after a reused connection turned out closed. */
const STALE_RETRIES = 2

class StaleSocket extends Error {
  constructor (readonly cause: KubeError) { super(cause.message) }
}

export interface RequestOptions {
  query?: Record<string, string | string[] | undefined>
  body?: unknown
  /** default application/json; patches name their kind */
  contentType?: string
  timeoutMs?: number
  maxBytes?: number
  signal?: AbortSignal
}

export interface WatchEvent<T> { type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR', object: T }

export interface Watch {
  /** settles when the watch ended (closed, timed out by the server, or failed) */
  readonly done: Promise<void>
  close: () => void
}

function queryString (q: RequestOptions['query']): string {
  const p = new URLSearchParams()
  for (const [k, v] of Object.entries(q ?? {})) {
    if (v === undefined) continue
    for (const one of Array.isArray(v) ? v : [v]) p.append(k, one)
  }
  const s = p.toString()
  return s === '' ? '' : `?${s}`
}

export class KubeClient {
  readonly namespace: string
  private readonly agent: http.Agent
  /** watches hold their connection until they end: never from the pool requests share */
  private readonly watchAgent: http.Agent
  private readonly base: URL

  constructor (readonly conn: KubeConnection) {
    this.namespace = conn.namespace
    this.base = new URL(conn.server)
    const tls = { ca: conn.ca, cert: conn.cert, key: conn.key, rejectUnauthorized: !conn.insecureSkipTlsVerify }
    this.agent = this.base.protocol === 'https:'
      ? new https.Agent({ keepAlive: true, maxSockets: 64, ...tls })
      : new http.Agent({ keepAlive: true, maxSockets: 64 })
    this.watchAgent = this.base.protocol === 'https:' ? new https.Agent({ keepAlive: false, ...tls }) : new http.Agent({ keepAlive: false })
  }

  /** `/api/v1/namespaces/<ns>/<plural>[/<name>[/<sub>]]` of the core group, or of `group/version`. */
  path (plural: string, name?: string, sub?: string, groupVersion?: string): string {
    const root = groupVersion === undefined ? '/api/v1' : `/apis/${groupVersion}`
    return `${root}/namespaces/${encodeURIComponent(this.namespace)}/${plural}${name === undefined ? '' : `/${encodeURIComponent(name)}`}${sub === undefined ? '' : `/${sub}`}`
  }

  private headers (extra: Record<string, string> = {}): Record<string, string> {
    const token = this.conn.token()
    return { accept: 'application/json', 'user-agent': 'cubicle-kubernetes-engine', ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...extra }
  }

  private url (path: string, query?: RequestOptions['query']): URL {
    return new URL(this.base.pathname.replace(/\/$/, '') + path + queryString(query), this.base)
  }

  /** One request; 2xx answers parsed as JSON, others thrown as their Status. */
  async request<T> (method: string, path: string, o: RequestOptions = {}): Promise<T> {
    const what = `${method} ${path}`
    const body = o.body === undefined ? undefined : Buffer.from(JSON.stringify(o.body))
    const maxBytes = o.maxBytes ?? MAX_ANSWER
    const timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(method, path, o, what, body, maxBytes, timeoutMs)
      } catch (err) {
        // A kept-alive connection the API server closed while idle (its idle time-out, or ours: a busy event
        // loop) resets when reused; the server never read the request, so it goes again on a fresh one.
        if (!(err instanceof StaleSocket) || attempt >= STALE_RETRIES) throw err instanceof StaleSocket ? err.cause : err
      }
    }
  }

  private async once<T> (method: string, path: string, o: RequestOptions, what: string, body: Buffer | undefined, maxBytes: number, timeoutMs: number): Promise<T> {
    return await new Promise<T>((resolve, reject) => {
      const mod = this.base.protocol === 'https:' ? https : http
      const req = mod.request(this.url(path, o.query), {
        method,
        agent: this.agent,
        headers: this.headers(body === undefined ? {} : { 'content-type': o.contentType ?? 'application/json', 'content-length': String(body.length) }),
        signal: o.signal
      }, res => {
        const chunks: Buffer[] = []
        let size = 0
        let over = false
        res.on('data', (c: Buffer) => {
          size += c.length
          if (size <= maxBytes) { chunks.push(c); return }
          if (over) return
          over = true
          clearTimeout(timer)
          res.destroy()
          reject(new KubeError(`Kubernetes API: ${what}: the answer exceeds ${maxBytes} bytes`, { statusCode: res.statusCode }))
        })
        res.on('end', () => {
          clearTimeout(timer)
          if (over) return
          const text = Buffer.concat(chunks).toString('utf8')
          let parsed: unknown
          try { parsed = text === '' ? undefined : JSON.parse(text) } catch { parsed = undefined }
          const code = res.statusCode ?? 0
          if (code >= 200 && code < 300) {
            if (parsed === undefined && text !== '') { reject(new KubeError(`Kubernetes API: ${what}: the answer is not JSON`, { statusCode: code })); return }
            resolve(parsed as T)
          } else reject(statusError(what, code, parsed ?? { message: text.slice(0, 300) || `HTTP ${code}` }))
        })
        res.on('error', err => { clearTimeout(timer); if (!over) reject(networkError(what, err)) })
      })
      const timer = setTimeout(() => { req.destroy(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'KUBE_TIMEOUT' })) }, timeoutMs)
      let answered = false
      req.on('response', () => { answered = true })
      req.on('error', err => {
        clearTimeout(timer)
        const e = networkError(what, err)
        const code = (err as { code?: string }).code
        reject(req.reusedSocket && !answered && (code === 'ECONNRESET' || code === 'EPIPE') && o.signal?.aborted !== true ? new StaleSocket(e) : e)
      })
      req.end(body)
    })
  }

  /**
   * Watches `path` (a collection) from `resourceVersion`: `onEvent` gets each event in order. The
   * watch ends when the server ends it (its timeout), on `close()`, or on a failure (`done` rejects).
   */
  watch<T> (path: string, query: Record<string, string | undefined>, onEvent: (e: WatchEvent<T>) => void): Watch {
    const what = `watch ${path}`
    let req: http.ClientRequest | undefined
    let closed = false
    const done = new Promise<void>((resolve, reject) => {
      const mod = this.base.protocol === 'https:' ? https : http
      req = mod.request(this.url(path, { ...query, watch: 'true' }), { method: 'GET', agent: this.watchAgent, headers: this.headers() }, res => {
        const code = res.statusCode ?? 0
        if (code < 200 || code >= 300) {
          const chunks: Buffer[] = []
          let size = 0
          res.on('data', (c: Buffer) => { size += c.length; if (size <= 64 * 1024) chunks.push(c) })
          res.on('end', () => {
            let parsed: unknown
            try { parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) } catch { parsed = undefined }
            reject(statusError(what, code, parsed))
          })
          return
        }
        let pending: Buffer[] = []
        let pendingSize = 0
        res.on('data', (c: Buffer) => {
          let start = 0
          let nl: number
          while ((nl = c.indexOf(10, start)) >= 0) {
            pending.push(c.subarray(start, nl))
            const line = Buffer.concat(pending).toString('utf8')
            pending = []
            pendingSize = 0
            start = nl + 1
            if (line.trim() === '') continue
            let ev: WatchEvent<T>
            try { ev = JSON.parse(line) as WatchEvent<T> } catch { req?.destroy(new KubeError(`Kubernetes API: ${what}: an event is not JSON`)); return }
            if (closed) return
            onEvent(ev)
          }
          pendingSize += c.length - start
          if (pendingSize > MAX_WATCH_LINE) { req?.destroy(new KubeError(`Kubernetes API: ${what}: an event exceeds ${MAX_WATCH_LINE} bytes`)); return }
          if (start < c.length) pending.push(c.subarray(start))
        })
        res.on('end', () => { resolve() })
        res.on('error', err => { if (closed) resolve(); else reject(networkError(what, err)) })
      })
      req.on('error', err => { if (closed) resolve(); else reject(networkError(what, err)) })
      req.end()
    })
    done.catch(() => {})
    return { done, close: () => { closed = true; req?.destroy() } }
  }

  /** Opens a WebSocket on `path` (pods/<name>/exec) with the offered subprotocols; rejects with the server's Status when it refuses. */
  async websocket (path: string, query: RequestOptions['query'], protocols: string[], timeoutMs = DEFAULT_TIMEOUT_MS, signal?: AbortSignal): Promise<WebSocket> {
    if (signal?.aborted === true) throw new KubeError(`Kubernetes API: exec ${path}: cancelled before it started`, { busy: true })
    const what = `exec ${path}`
    const url = this.url(path, query)
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:'
    const ws = new WebSocket(url, protocols, {
      headers: this.headers(),
      handshakeTimeout: timeoutMs,
      maxPayload: 4 * 1024 * 1024,
      perMessageDeflate: false,
      ...(this.base.protocol === 'https:' ? { ca: this.conn.ca, cert: this.conn.cert, key: this.conn.key, rejectUnauthorized: !this.conn.insecureSkipTlsVerify } : {})
    })
    return await new Promise<WebSocket>((resolve, reject) => {
      const onAbort = (): void => { fail(new KubeError(`Kubernetes API: exec ${path}: cancelled while it started`, { busy: true })) }
      const fail = (err: unknown): void => { signal?.removeEventListener('abort', onAbort); ws.removeAllListeners('open'); ws.terminate(); reject(err) }
      signal?.addEventListener('abort', onAbort, { once: true })
      ws.once('open', () => { signal?.removeEventListener('abort', onAbort); ws.removeAllListeners('unexpected-response'); ws.removeAllListeners('error'); ws.on('error', () => {}); resolve(ws) })
      ws.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = []
        let size = 0
        res.on('data', (c: Buffer) => { size += c.length; if (size <= 64 * 1024) chunks.push(c) })
        res.on('end', () => {
          let parsed: unknown
          try { parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) } catch { parsed = { message: Buffer.concat(chunks).toString('utf8').slice(0, 300) } }
          fail(statusError(what, res.statusCode ?? 0, parsed))
        })
        res.on('error', err => { fail(networkError(what, err)) })
      })
      ws.once('error', err => {
        // ws's own time-out of the upgrade: the server is there but slow.
        fail(/handshake has timed out/i.test(err.message) ? new KubeError(`Kubernetes API: ${what}: no upgrade within ${timeoutMs} ms`, { busy: true, cause: err }) : networkError(what, err))
      })
    })
  }

  close (): void { this.agent.destroy(); this.watchAgent.destroy() }
}
