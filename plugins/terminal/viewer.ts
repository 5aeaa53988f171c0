import type { FastifyBaseLogger } from 'fastify'
import type { RawData, WebSocket } from 'ws'
import type { SandboxStream } from '../sandbox/types.js'
import {
  DEFAULT_SIZE, OUTPUT, SET_PREFERENCES, SET_TITLE, JSON_DATA, frame, parseClientMessage, parseSize, type TermSize
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
  title: string
  highWaterBytes: number
  lowWaterBytes: number
  maxMessageBytes: number
  initTimeoutMs: number
}

export interface ViewerDeps {
  open: () => Promise<SandboxStream>
  /** Detaches this viewer's tmux client inside the sandbox (Docker keeps it running after the connection closes). */
  detach: () => Promise<void>
  /**
   * Why the tmux client ended when it said nothing (it was killed): 'stopped' (the sandbox is going
   * away), 'ended' (session main is gone) or 'detached'.
   */
  endReason: () => Promise<EndReason>
  log: FastifyBaseLogger
  /** Called once, after cleanup. */
  onGone: () => void
}

export interface Viewer {
  /** Closes the socket and cleans up; `detach: false` when the sandbox is gone anyway. Idempotent. */
  close: (code: number, reason: string, opts?: { detach?: boolean }) => Promise<void>
}

export type EndReason = 'stopped' | 'ended' | 'detached'

/**
 * tmux's client prints why it exits as its last line: `[exited]` (the session ended),
 * `[server exited]`, `[detached (from session main)]`, `[lost tty]` (SIGHUP: our own detach),
 * `[terminated]`. Killed outright (the sandbox stopping) it prints nothing.
 */
export function exitMessage (tail: string): EndReason | null {
  const m = /\[(exited|server exited|detached[^\]\n]{0,80}|lost tty|terminated)\]\s*$/.exec(tail)
  if (m === null) return null
  return m[1] === 'exited' || m[1] === 'server exited' ? 'ended' : 'detached'
}

const TAIL_BYTES = 256
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
  let started = false
  let queued: Buffer[] = []
  let queuedBytes = 0
  let inflight = 0
  let pausedByClient = false
  let streamPaused = false
  let closing: Promise<void> | undefined
  let tail = Buffer.alloc(0)
  const resize = createResizer(() => stream, deps.log)

  const initTimer = setTimeout(() => { if (state === 'init') startAttach(DEFAULT_SIZE) }, settings.initTimeoutMs)

  function updateFlow (): void {
    if (stream === undefined || streamEnded) return
    // A viewer whose socket is closing reads nothing more once tmux drew (cleanup waits for that): send()
    // would throw the output away, and the send callbacks that fail as the socket closes would resume a
    // flood, read at full speed until the stream closes.
    const leaving = started && (state === 'closing' || socket.readyState !== WS_OPEN)
    const pause = leaving || pausedByClient || inflight > settings.highWaterBytes
    if (pause && !streamPaused) { streamPaused = true; stream.socket.pause() }
    if (!pause && streamPaused && inflight <= settings.lowWaterBytes) { streamPaused = false; stream.socket.resume() }
  }

  function send (command: number, payload: Buffer | string): void {
    if (socket.readyState !== WS_OPEN) { updateFlow(); return }
    const data = frame(command, payload)
    inflight += data.length
    socket.send(data, { binary: true }, () => { inflight -= data.length; updateFlow() })
    updateFlow()
  }

  function onOutput (data: Buffer): void {
    started = true
    if (data.length === 0) return
    tail = data.length >= TAIL_BYTES ? Buffer.from(data.subarray(-TAIL_BYTES)) : Buffer.concat([tail, data]).subarray(-TAIL_BYTES)
    if (state !== 'closing') send(OUTPUT, data)
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
    let reason = exitMessage(tail.toString('latin1'))
    if (reason === null) {
      try { reason = await deps.endReason() } catch { reason = 'stopped' }
    }
    if (reason === 'stopped') await close(1001, 'sandbox stopped', { detach: false })
    else await close(1000, reason === 'ended' ? 'session ended' : 'detached', { detach: false })
  }

  async function cleanup (detach: boolean): Promise<void> {
    clearTimeout(initTimer)
    // An attach in flight finishes first, so the tmux client it starts is detached too.
    if (attaching !== undefined) await attaching
    if (stream !== undefined && !streamEnded && detach) {
      // tmux draws at once when it attaches: until it did, the client may not be running yet.
      for (let i = 0; i < 100 && !started && !streamEnded; i++) await new Promise(resolve => setTimeout(resolve, 20))
      if (!streamEnded) {
        try { await deps.detach() } catch (err) { deps.log.debug({ err }, 'terminal detach failed') }
      }
    }
    stream?.close()
    deps.onGone()
  }

  async function close (code: number, reason: string, opts: { detach?: boolean } = {}): Promise<void> {
    if (closing !== undefined) return await closing
    state = 'closing'
    updateFlow()
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
