import type { Readable } from 'node:stream'

/*
 * Helpers for exec streams: the exit sentinel of the bash_tool wrapper, the kill script and the byte
 * budget of a long-lived stream (the engine's own stream framing is the engine's business: a process
 * hands its output on as stdout and stderr, engine-types.ts ExecProcess). Unit-testable.
 */

export const EXIT_SENTINEL = '__cubicle_exit:'

/** Written by the wrapper to stdout after bash exited: everything bash printed is before it. */
export const EOF_MARKER = '\0__cubicle_eof\n'

/**
 * argv of bash_tool's wrapper: the command's stdout and stderr both go to the exec's stdout in arrival
 * order; the top-level bash's exit status is reported on the exec's stderr once bash has exited, so
 * the caller can return even while background children keep stdout open. An engine (dockerd) may copy the two
 * pipes independently, and under load the status can arrive well before bash's last output, so the
 * wrapper then also marks the end of bash's output on stdout (EOF_MARKER, which EofFilter removes).
 * The status line also carries the cgroup's process count (cgroup v2 or v1 path) read with shell
 * builtins only, so it still works when no process can be forked: a hint that makes the driver ask
 * the engine whether the sandbox is saturated (the sandbox could forge it; it only triggers a check).
 */
export function commandArgv (command: string): string[] {
  return ['/bin/sh', '-c', 'bash -c "$1" </dev/null 2>&1; s=$?; p=; ' +
    '{ read -r p </sys/fs/cgroup/pids.current || read -r p </sys/fs/cgroup/pids/pids.current; } 2>/dev/null; ' +
    `echo "${EXIT_SENTINEL}$s\${p:+ $p}" >&2; printf '\\000__cubicle_eof\\n'`, 'sh', command]
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
  /** the process count the wrapper read after bash exited (untrusted: a hint) */
  pids: number | undefined

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
    if (this.pending !== '' && !(EXIT_SENTINEL.startsWith(this.pending) || (this.pending.startsWith(EXIT_SENTINEL) && this.pending.length < 48))) {
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
    const m = /^__cubicle_exit:(\d{1,3})(?: (\d{1,9}))?$/.exec(line)
    if (m !== null && this.exitCode === null) {
      this.exitCode = Number(m[1])
      if (m[2] !== undefined) this.pids = Number(m[2])
      this.onExit(this.exitCode)
      return
    }
    this.other(newline ? `${line}\n` : line)
  }
}

/**
 * The kill script, run as a second exec: signals every process whose environment carries
 * `CUBICLE_EXEC_ID=<id>` (the id is ours, hex only, passed as an argument) and the process groups
 * those processes lead (one `kill -- -pid…` for all: a pid that leads no group is skipped by kill).
 * With KILL it first stops every marked process (a stopped process cannot fork, so a fork bomb
 * cannot outrun the rounds), then kills, and repeats until none is left. Per process it runs
 * builtins only, so thousands of processes cost one grep per round (3,000 sleeping processes: about
 * 1 s). Prints `done <signalled> <left>` (left: marked processes still alive after SIGKILL, always 0
 * for TERM).
 */
export const KILL_SCRIPT = `
sig=$1; id=$2; total=0; round=0
marked() { grep -lzx "CUBICLE_EXEC_ID=$id" /proc/[0-9]*/environ 2>/dev/null; }
while [ $round -lt 30 ]; do
  round=$((round + 1))
  list=$(marked)
  [ -n "$list" ] || break
  pids=; groups=
  for f in $list; do f=\${f#/proc/}; f=\${f%/environ}; pids="$pids $f"; groups="$groups -$f"; total=$((total + 1)); done
  [ "$sig" = KILL ] && kill -s STOP $pids 2>/dev/null
  kill -s "$sig" -- $groups 2>/dev/null
  kill -s "$sig" $pids 2>/dev/null
  [ "$sig" = KILL ] || break
done
left=0
[ "$sig" = KILL ] && left=$(marked | wc -l)
echo "done $total $left"
`

export function killArgv (signal: 'TERM' | 'KILL', execId: string): string[] {
  if (!/^[0-9a-f]{8,64}$/.test(execId)) throw new TypeError('exec id must be hex')
  return ['/bin/sh', '-c', KILL_SCRIPT, 'cubicle-kill', signal, execId]
}

/**
 * A byte budget for one stream (token bucket): `rate` bytes a second, at most `burst` saved up while
 * the stream is quiet. `charge(n)` answers how many ms the reader should wait before reading on so
 * that what it read stays within the budget (0: read on at once).
 */
export class ByteBudget {
  private tokens: number
  private at: number

  constructor (private readonly rate: number, private readonly burst: number, private readonly now: () => number = Date.now) {
    if (!(rate > 0) || !(burst > 0)) throw new RangeError('rate and burst must be positive')
    this.tokens = burst
    this.at = now()
  }

  charge (n: number): number {
    const t = this.now()
    this.tokens = Math.min(this.burst, this.tokens + Math.max(0, t - this.at) * this.rate / 1000) - n
    this.at = t
    return this.tokens >= 0 ? 0 : Math.ceil(-this.tokens * 1000 / this.rate)
  }
}

/**
 * Reads `stream` within `budget`: each chunk goes to `onData`, and a chunk that overdraws the budget
 * pauses the stream until the debt is repaid. The writer on the other side then meets backpressure
 * (pipe and socket buffers fill, its writes block) instead of the reader doing more work. Answers a
 * function that cancels a pending resume (call it when the stream is closed). `exempt`, asked after each
 * chunk, says how many of the bytes read so far are not to be charged (flow-controlled elsewhere).
 */
export function readWithin (stream: Readable, budget: ByteBudget, onData: (chunk: Buffer) => void, exempt?: () => number): () => void {
  let timer: NodeJS.Timeout | undefined
  let owed = 0
  stream.on('data', (chunk: Buffer) => {
    onData(chunk)
    owed += exempt?.() ?? 0
    const free = Math.min(owed, chunk.length)
    owed -= free
    const wait = budget.charge(chunk.length - free)
    if (wait === 0 || timer !== undefined || stream.destroyed) return
    stream.pause()
    timer = setTimeout(() => { timer = undefined; if (!stream.destroyed) stream.resume() }, wait)
  })
  return () => { clearTimeout(timer); timer = undefined }
}
