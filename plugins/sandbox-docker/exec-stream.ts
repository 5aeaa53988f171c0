/*
 * Pure helpers for exec streams: Docker's stdout/stderr multiplexing, the exit sentinel of the
 * bash_tool wrapper and the kill script. No Docker client here, so all of it is unit-testable.
 */

/** Stream ids of Docker's multiplexed attach protocol. */
export const STDOUT = 1
export const STDERR = 2

/**
 * Incremental demultiplexer of Docker's attach framing (8-byte header: stream id, 3 zero bytes,
 * big-endian length). Payloads are handed on as slices of the incoming chunks: nothing accumulates
 * beyond a partial 8-byte header, so a gigabyte of output streams through in constant memory.
 */
export class Demuxer {
  private readonly header = Buffer.alloc(8)
  private headerLen = 0
  private remaining = 0
  private stream = STDOUT

  constructor (private readonly onFrame: (stream: number, data: Buffer) => void) {}

  push (chunk: Buffer): void {
    let off = 0
    while (off < chunk.length) {
      if (this.remaining === 0) {
        const take = Math.min(8 - this.headerLen, chunk.length - off)
        chunk.copy(this.header, this.headerLen, off, off + take)
        this.headerLen += take
        off += take
        if (this.headerLen < 8) return
        this.headerLen = 0
        this.stream = this.header[0] ?? STDOUT
        this.remaining = this.header.readUInt32BE(4)
        continue
      }
      const take = Math.min(this.remaining, chunk.length - off)
      const data = chunk.subarray(off, off + take)
      off += take
      this.remaining -= take
      if (this.stream === STDOUT || this.stream === STDERR) this.onFrame(this.stream, data)
    }
  }
}

export const EXIT_SENTINEL = '__cubicle_exit:'

/** Written by the wrapper to stdout after bash exited: everything bash printed is before it. */
export const EOF_MARKER = '\0__cubicle_eof\n'

/**
 * argv of bash_tool's wrapper: the command's stdout and stderr both go to the exec's stdout in arrival
 * order; the top-level bash's exit status is reported on the exec's stderr once bash has exited, so
 * the caller can return even while background children keep stdout open. dockerd copies the two
 * pipes independently, and under load the status can arrive well before bash's last output, so the
 * wrapper then also marks the end of bash's output on stdout (EOF_MARKER, which EofFilter removes).
 */
export function commandArgv (command: string): string[] {
  return ['/bin/sh', '-c', `bash -c "$1" </dev/null 2>&1; echo "${EXIT_SENTINEL}$?" >&2; printf '\\000__cubicle_eof\\n'`, 'sh', command]
}

const MARKER = Buffer.from(EOF_MARKER)

/**
 * Passes stdout through, without the first EOF_MARKER, and reports the marker once. Bytes at a chunk
 * end that could begin the marker are held until the next chunk (or end()), so a marker split across
 * chunks is still found; nothing else is buffered.
 */
export class EofFilter {
  private held: Buffer = Buffer.alloc(0)
  seen = false

  constructor (private readonly pass: (data: Buffer) => void, private readonly onEof: () => void) {}

  push (data: Buffer): void {
    if (this.seen) { this.pass(data); return }
    const buf = this.held.length === 0 ? data : Buffer.concat([this.held, data])
    this.held = Buffer.alloc(0)
    const at = buf.indexOf(MARKER)
    if (at !== -1) {
      if (at > 0) this.pass(buf.subarray(0, at))
      this.seen = true
      this.onEof()
      if (at + MARKER.length < buf.length) this.pass(buf.subarray(at + MARKER.length))
      return
    }
    let keep = Math.min(MARKER.length - 1, buf.length)
    while (keep > 0 && !MARKER.subarray(0, keep).equals(buf.subarray(buf.length - keep))) keep--
    if (keep < buf.length) this.pass(buf.subarray(0, buf.length - keep))
    if (keep > 0) this.held = Buffer.from(buf.subarray(buf.length - keep))
  }

  /** Hands on what was held back (output that ended like the start of the marker). */
  end (): void {
    if (this.held.length > 0) this.pass(this.held)
    this.held = Buffer.alloc(0)
  }
}

/**
 * Reads the wrapper's stderr: finds the sentinel line and hands every other byte (the wrapper's own
 * complaints, e.g. a missing bash) to `other`, line by line.
 */
export class SentinelParser {
  private pending = ''
  private readonly decoder = new TextDecoder('utf-8')
  exitCode: number | null = null

  constructor (private readonly other: (text: string) => void, private readonly onExit: (code: number) => void) {}

  push (data: Buffer): void {
    this.pending += this.decoder.decode(data, { stream: true })
    let nl: number
    while ((nl = this.pending.indexOf('\n')) !== -1) {
      const line = this.pending.slice(0, nl)
      this.pending = this.pending.slice(nl + 1)
      this.line(line, true)
    }
    // A partial line that cannot become the sentinel is passed on at once.
    if (this.pending !== '' && !(EXIT_SENTINEL.startsWith(this.pending) || (this.pending.startsWith(EXIT_SENTINEL) && this.pending.length < 40))) {
      this.other(this.pending)
      this.pending = ''
    }
  }

  end (): void {
    this.pending += this.decoder.decode()
    if (this.pending !== '') this.line(this.pending, false)
    this.pending = ''
  }

  private line (line: string, newline: boolean): void {
    const m = /^__cubicle_exit:(\d{1,3})$/.exec(line)
    if (m !== null && this.exitCode === null) {
      this.exitCode = Number(m[1])
      this.onExit(this.exitCode)
      return
    }
    this.other(newline ? `${line}\n` : line)
  }
}

/**
 * The kill script, run as a second exec: signals every process whose environment carries
 * `CUBICLE_EXEC_ID=<id>` (the id is ours, hex only, passed as an argument) and the process groups
 * those processes lead. With KILL it repeats until no marked process is left, so a process forking
 * while it is being killed cannot escape. Prints `done <signalled> <left>` (left: marked processes still
 * alive after SIGKILL, always 0 for TERM).
 */
export const KILL_SCRIPT = `
sig=$1; id=$2; total=0; round=0
marked() { grep -lzx "CUBICLE_EXEC_ID=$id" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | tr '\\n' ' '; }
while [ $round -lt 20 ]; do
  round=$((round + 1))
  pids=$(marked)
  [ -n "$pids" ] || break
  for p in $pids; do
    g=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f3)
    case " $pids " in *" $g "*) kill -s "$sig" -- "-$g" 2>/dev/null ;; esac
  done
  kill -s "$sig" $pids 2>/dev/null
  total=$((total + $(echo $pids | wc -w)))
  [ "$sig" = KILL ] || break
  sleep 0.05
done
left=0
[ "$sig" = KILL ] && left=$(marked | wc -w)
echo "done $total $left"
`

export function killArgv (signal: 'TERM' | 'KILL', execId: string): string[] {
  if (!/^[0-9a-f]{8,64}$/.test(execId)) throw new TypeError('exec id must be hex')
  return ['/bin/sh', '-c', KILL_SCRIPT, 'cubicle-kill', signal, execId]
}
