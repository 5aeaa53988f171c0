import type { FastifyBaseLogger } from 'fastify'
import type { RawData, WebSocket } from 'ws'
import type { SandboxStream } from '../sandbox-docker/types.js'
import {
  DEFAULT_SIZE, OUTPUT, SET_PREFERENCES, SET_TITLE, JSON_DATA, frame, parseClientMessage, parseHeader, parseSize,
  type ClientIdentity, type TermSize
} from './protocol.js'

/*
 * One viewer: a WebSocket speaking ttyd's framing on one side, its own TTY exec running the tmux
 * client on the other. tmux shares session `main` between viewers and sizes the window after the
 * most recently active client (tmux's default `window-size latest`), so each viewer resizes only
 * its own exec.
 *
 * Flow control: output is paused (the exec socket stops being read, the pty fills, tmux stops
 * drawing for this client and redraws once it catches up) while the client asked for a pause or
 * more than `highWaterBytes` are queued on the WebSocket; it resumes below `lowWaterBytes`. Server
 * memory per viewer is therefore bounded by the high-water mark plus one chunk, whatever the
 * sandbox prints, and a slow viewer slows down only itself.
 */

export interface ViewerSettings {
  argv: string[]
  env: Record<string, string>
  title: string
  highWaterBytes: number
  lowWaterBytes: number
  maxMessageBytes: number
  initTimeoutMs: number
}

export interface ViewerDeps {
  open: () => Promise<SandboxStream>
  /** Detaches this viewer's tmux client inside the sandbox (Docker keeps it running after the connection closes). */
  detach: (client: ClientIdentity) => Promise<void>
  /** Why the tmux client ended: 'stopped' (sandbox gone), 'ended' (session main gone) or 'detached'. */
  endReason: () => Promise<'stopped' | 'ended' | 'detached'>
  log: FastifyBaseLogger
  /** Called once, after cleanup. */
  onGone: () => void
}

export interface Viewer {
  /** Closes the socket and cleans up; `detach: false` when the sandbox is gone anyway. Idempotent. */
  close: (code: number, reason: string, opts?: { detach?: boolean }) => Promise<void>
}

const WS_OPEN = 1
/** Queued input (before the stream opens, or not yet taken by Docker) above which the client is paused. */
const INPUT_HIGH_WATER = 1024 * 1024

const asBuffer = (data: RawData): Buffer =>
  Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)

export function openViewer (socket: WebSocket, deps: ViewerDeps, settings: ViewerSettings): Viewer {
  let state: 'init' | 'attaching' | 'open' | 'closing' = 'init'
  let stream: SandboxStream | undefined
  let attaching: Promise<void> | undefined
  let streamEnded = false
  let identity: ClientIdentity | null = null
  let head: Buffer | null = Buffer.alloc(0)
  let queued: Buffer[] = []
  let queuedBytes = 0
  let inflight = 0
  let pausedByClient = false
  let streamPaused = false
  let closing: Promise<void> | undefined
  const resize = createResizer(() => stream, deps.log)

  const initTimer = setTimeout(() => { if (state === 'init') startAttach(DEFAULT_SIZE) }, settings.initTimeoutMs)

  function updateFlow (): void {
    if (stream === undefined || streamEnded) return
    const pause = pausedByClient || inflight > settings.highWaterBytes
    if (pause && !streamPaused) { streamPaused = true; stream.socket.pause() }
    if (!pause && streamPaused && inflight <= settings.lowWaterBytes) { streamPaused = false; stream.socket.resume() }
  }

  function send (command: number, payload: Buffer | string): void {
    if (socket.readyState !== WS_OPEN) return
    const data = frame(command, payload)
    inflight += data.length
    socket.send(data, { binary: true }, () => { inflight -= data.length; updateFlow() })
    updateFlow()
  }

  function onOutput (chunk: Buffer): void {
    let data = chunk
    if (head !== null) {
      head = Buffer.concat([head, chunk])
      const parsed = parseHeader(head)
      if (parsed.state === 'more') return
      head = null
      identity = parsed.identity
      if (identity === null) deps.log.warn('the terminal client did not report its pid; it cannot be detached on close')
      data = parsed.rest
    }
    if (data.length > 0 && state !== 'closing') send(OUTPUT, data)
  }

  function startAttach (size: TermSize): void {
    clearTimeout(initTimer)
    state = 'attaching'
    attaching = attach(size)
  }

  async function attach (size: TermSize): Promise<void> {
    send(SET_TITLE, settings.title)
    send(SET_PREFERENCES, '{}')
    try {
      stream = await deps.open()
    } catch (err) {
      const gone = (err as { code?: string }).code === 'SANDBOX_NOT_RUNNING'
      if (!gone) deps.log.warn({ err }, 'terminal attach failed')
      void close(gone ? 1001 : 1011, gone ? 'sandbox stopped' : 'terminal unavailable', { detach: false })
      return
    }
    const s = stream
    s.socket.on('error', err => { deps.log.debug({ err }, 'terminal stream error') })
    s.socket.once('close', () => { streamEnded = true; void onStreamEnd() })
    s.demux(onOutput)
    resize(size)
    if (state === 'closing') return
    state = 'open'
    const pending = queued
    queued = []
    queuedBytes = 0
    for (const message of pending) handle(message)
  }

  function handle (data: Buffer): void {
    const msg = parseClientMessage(data)
    switch (msg.type) {
      case 'input': writeInput(msg.data); break
      case 'resize': resize(msg.size); break
      case 'pause': pausedByClient = true; updateFlow(); break
      case 'resume': pausedByClient = false; updateFlow(); break
      default: deps.log.debug({ reason: msg.reason }, 'terminal message ignored')
    }
  }

  function writeInput (data: Buffer): void {
    if (stream === undefined || streamEnded || data.length === 0) return
    const s = stream.socket
    s.write(data)
    // A client typing (or pasting) faster than the sandbox reads is paused instead of buffered without bound.
    if (s.writableLength > INPUT_HIGH_WATER && !socket.isPaused) {
      socket.pause()
      s.once('drain', () => { if (state === 'open') socket.resume() })
    }
  }

  function onMessage (raw: RawData): void {
    const data = asBuffer(raw)
    if (data.length > settings.maxMessageBytes) { void close(1009, 'message too large'); return }
    if (state === 'init') {
      const size = data[0] === JSON_DATA ? parseSize(data) : null
      startAttach(size ?? DEFAULT_SIZE)
      if (size !== null) return
    }
    if (state === 'attaching') {
      queued.push(data)
      queuedBytes += data.length
      if (queuedBytes > INPUT_HIGH_WATER) void close(1008, 'too much input before the terminal opened')
      return
    }
    if (state === 'open') handle(data)
  }

  async function onStreamEnd (): Promise<void> {
    if (state === 'closing') return
    let reason: 'stopped' | 'ended' | 'detached' = 'stopped'
    try { reason = await deps.endReason() } catch {}
    if (reason === 'stopped') await close(1001, 'sandbox stopped', { detach: false })
    else await close(1000, reason === 'ended' ? 'session ended' : 'detached', { detach: false })
  }

  async function cleanup (detach: boolean): Promise<void> {
    clearTimeout(initTimer)
    // An attach in flight finishes first, so the tmux client it starts is detached too.
    if (attaching !== undefined) await attaching
    if (stream !== undefined && !streamEnded && detach) {
      // The client identifies itself in its first bytes (protocol.ts); give it a moment to do so.
      for (let i = 0; i < 100 && head !== null && !streamEnded; i++) await new Promise(resolve => setTimeout(resolve, 20))
      if (identity !== null && !streamEnded) {
        try { await deps.detach(identity) } catch (err) { deps.log.debug({ err }, 'terminal detach failed') }
      }
    }
    stream?.close()
    deps.onGone()
  }

  async function close (code: number, reason: string, opts: { detach?: boolean } = {}): Promise<void> {
    if (closing !== undefined) return await closing
    state = 'closing'
    if (socket.readyState === WS_OPEN || socket.readyState === 0) socket.close(code, reason)
    closing = cleanup(opts.detach !== false)
    return await closing
  }

  socket.on('message', onMessage)
  socket.on('close', () => { void close(1000, 'closed') })
  socket.on('error', err => { deps.log.debug({ err }, 'terminal socket error') })
  return { close }
}

/** Resizes through the exec resize API, one call at a time; sizes arriving meanwhile collapse into the latest. */
function createResizer (current: () => SandboxStream | undefined, log: FastifyBaseLogger): (size: TermSize) => void {
  let running = false
  let next: TermSize | null = null
  let last = ''
  const run = async (): Promise<void> => {
    running = true
    while (next !== null) {
      const size = next
      next = null
      const key = `${size.columns}x${size.rows}`
      const s = current()
      if (s === undefined || key === last) continue
      try {
        await s.resize(size.columns, size.rows)
        last = key
      } catch (err) { log.debug({ err }, 'terminal resize failed') }
    }
    running = false
  }
  return size => {
    next = size
    if (!running) void run()
  }
}
