import { randomBytes } from 'node:crypto'
import type WebSocket from 'ws'
import type { ExecProcess, ExecSignal, ExecSpec, ResourceStats } from '../sandbox/types.js'
import type { KubeClient } from './kube-client.js'
import { KubeError } from './kube-error.js'
import { CONTAINER } from './kube-objects.js'
import { KubeProcess } from './kube-process.js'
import { preamble, wrapperCommand } from './kube-wrapper.js'

/*
 * Processes in a sandbox's pod through pods/exec (kube-wrapper.ts says how a call's environment,
 * directory and argv reach the process without the URL). Every exec carries `CUBICLE_ENGINE_EXEC=<hex>`
 * so `signal()` reaches it and what it started through a second exec (the API has no call to signal
 * an exec's process). Every process runs as the pod's user: an exec as another user is refused.
 */

export const PROTOCOLS = ['v5.channel.k8s.io', 'v4.channel.k8s.io']
export const PROCESS_MARK = 'CUBICLE_ENGINE_EXEC'
const SIGNAL_SCRIPT = 'for f in $(grep -lzx "$2" /proc/[0-9]*/environ 2>/dev/null); do f=${f#/proc/}; kill -s "$1" "${f%/environ}" 2>/dev/null; done; true'
/** Every process of the sandbox's user but the caller: SIGSTOP freezes them (pause), SIGCONT thaws them. */
const ALL_SCRIPT = 'kill -s "$1" -- -1 2>/dev/null; true'
const PUT_SCRIPT = 'd=${1%/*}; [ -d "${d:-/}" ] || exit 3; t="$1.cubicle-put.$$"; umask 077; cat > "$t" && chmod "$2" "$t" && mv -f "$t" "$1" || { rm -f "$t"; exit 4; }'
const STATS_SCRIPT = [
  // cgroup v2 files first, then v1's
  'r () { for f; do v=$(cat "/sys/fs/cgroup/$f" 2>/dev/null) && break; v=; done; printf "%s " "${v:--}"; }',
  'k () { v=$(grep "^$2 " "/sys/fs/cgroup/$1" 2>/dev/null | cut -d" " -f2); [ -n "$v" ] || v=$(grep "^$4 " "/sys/fs/cgroup/$3" 2>/dev/null | cut -d" " -f2); printf "%s " "${v:--}"; }',
  'r pids.current pids/pids.current; r pids.max pids/pids.max; r memory.current memory/memory.usage_in_bytes; r memory.max memory/memory.limit_in_bytes',
  'k memory.stat inactive_file memory/memory.stat total_inactive_file; k memory.events oom_kill memory/memory.oom_control oom_kill'
].join('\n')
const MAX_SMALL_OUTPUT = 64 * 1024

export interface ExecDeps {
  client: KubeClient
  /** the sandbox's user as the core names it (`assistant`): the only user an exec may ask for */
  user: string
  /** a failure of the exec's upgrade in the contract's words: no-such-sandbox or not-running (asks for the record) */
  explain: (id: string, err: KubeError) => Promise<KubeError>
  /** whether the engine paused this sandbox (an exec into it is refused) */
  paused: (id: string) => boolean
  /** the subprotocols offered, best first (default v5 then v4) */
  protocols?: string[]
}

export interface Execs {
  exec: (id: string, spec: ExecSpec) => Promise<ExecProcess>
  /** runs a short command to its end; its stdout (bounded) and exit code */
  run: (id: string, argv: string[], stdin?: Buffer, within?: Pick<ExecSpec, 'deadline' | 'signal'>) => Promise<{ code: number | null, stdout: string }>
  signalAll: (id: string, signal: 'STOP' | 'CONT') => Promise<void>
  putFile: (id: string, path: string, content: Buffer, mode: number) => Promise<void>
  stats: (id: string, limits: { memory: number }) => Promise<ResourceStats & { oomKills: number }>
}

async function drain (p: ExecProcess, max = MAX_SMALL_OUTPUT): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  p.stderr.resume()
  for await (const c of p.stdout) { size += (c as Buffer).length; if (size <= max) chunks.push(c as Buffer) }
  return Buffer.concat(chunks).toString('utf8')
}

export function execCalls (d: ExecDeps): Execs {
  const { client } = d

  /** Opens the exec's stream, within the caller's deadline and until its cancellation. */
  async function open (id: string, command: string[], tty: boolean, spec: Pick<ExecSpec, 'deadline' | 'signal'>): Promise<WebSocket> {
    const query = { command, container: CONTAINER, stdin: 'true', stdout: 'true', stderr: tty ? 'false' : 'true', tty: tty ? 'true' : 'false' }
    // Past its deadline: nothing starts (a 1 ms upgrade budget could still win the race against a fast API server).
    if (spec.deadline !== undefined && spec.deadline <= Date.now()) throw new KubeError(`Kubernetes API: exec in pod ${id}: its deadline passed before it started`, { busy: true })
    const timeoutMs = spec.deadline === undefined ? undefined : Math.max(1, Math.min(30_000, spec.deadline - Date.now()))
    try {
      return await client.websocket(client.path('pods', id, 'exec'), query, d.protocols ?? PROTOCOLS, timeoutMs, spec.signal)
    } catch (err) {
      if (err instanceof KubeError && (err.statusCode === 404 || err.statusCode === 400 || err.statusCode === 409)) throw await d.explain(id, err)
      throw err
    }
  }

  async function exec (id: string, spec: ExecSpec): Promise<ExecProcess> {
    if (spec.user !== undefined && spec.user !== d.user) throw new KubeError(`the Kubernetes engine runs every process of a sandbox as its user (${d.user}); an exec as "${spec.user.slice(0, 50)}" is not possible`, { reason: 'not-permitted' })
    if (d.paused(id)) throw new KubeError(`sandbox ${id} is paused`, { reason: 'not-running', statusCode: 409 })
    const mark = randomBytes(8).toString('hex')
    const tty = spec.tty === true
    const stdin = spec.stdin === true
    const head = preamble({ env: [...(spec.env ?? []), `${PROCESS_MARK}=${mark}`], cwd: spec.cwd ?? '/', argv: spec.argv, stdin })
    const ops = {
      signal: async (signal: ExecSignal) => {
        const r = await run(id, ['/bin/sh', '-c', SIGNAL_SCRIPT, 'cubicle-signal', signal, `${PROCESS_MARK}=${mark}`])
        if (r.code !== 0) throw new KubeError(`signal ${signal} did not reach the process (exit ${String(r.code)})`)
      }
    }
    if (!tty) {
      const ws = await open(id, wrapperCommand('-'), false, spec)
      return new KubeProcess(ws, false, stdin, head, ops)
    }
    // A terminal would echo the preamble: hand it over in a 0600 file the TTY exec reads and removes.
    const file = `/tmp/.cubicle-exec-${mark}`
    const written = await run(id, ['/bin/sh', '-c', 'umask 077 && cat > "$1"', 'cubicle-put', file], head, spec)
    if (written.code !== 0) throw new KubeError(`the TTY exec could not be prepared in the sandbox (exit ${String(written.code)})`)
    const ws = await open(id, wrapperCommand(file), true, spec)
    return new KubeProcess(ws, true, stdin, null, ops)
  }

  async function run (id: string, argv: string[], stdin?: Buffer, within: Pick<ExecSpec, 'deadline' | 'signal'> = {}): Promise<{ code: number | null, stdout: string }> {
    const p = await exec(id, { argv, cwd: '/', stdin: stdin !== undefined, deadline: within.deadline, signal: within.signal })
    if (stdin !== undefined) p.stdin?.end(stdin)
    const stdout = await drain(p)
    return { code: (await p.exit).code, stdout }
  }

  return {
    exec,
    run,
    async signalAll (id, signal) {
      const r = await run(id, ['/bin/sh', '-c', ALL_SCRIPT, 'cubicle-signal', signal])
      if (r.code !== 0) throw new KubeError(`SIG${signal} to the sandbox's processes failed (exit ${String(r.code)})`)
    },
    async putFile (id, path, content, mode) {
      if (!path.startsWith('/') || path.includes('\0')) throw new KubeError(`putFile needs an absolute path, got "${path.slice(0, 200)}"`, { reason: 'no-such-path' })
      const r = await run(id, ['/bin/sh', '-c', PUT_SCRIPT, 'cubicle-put', path, (mode & 0o7777).toString(8)], content)
      if (r.code === 3) throw new KubeError(`putFile ${path}: the parent directory does not exist`, { reason: 'no-such-path', statusCode: 404 })
      if (r.code !== 0) throw new KubeError(`putFile ${path}: the write was refused (exit ${String(r.code)})`, { reason: 'not-permitted', statusCode: 403 })
    },
    async stats (id, limits) {
      const r = await run(id, ['/bin/sh', '-c', STATS_SCRIPT])
      // cgroup v1 reports "no limit" as a number near 2^63
      const [pidsNow, pidsMax, memNow, memMax, inactive, ooms] = r.stdout.trim().split(' ').map(s => /^\d{1,20}$/.test(s) && Number(s) < 2 ** 60 ? Number(s) : undefined)
      return {
        pids: { current: pidsNow ?? 0, limit: pidsMax ?? 0 },
        memory: { usage: Math.max(0, (memNow ?? 0) - (inactive ?? 0)), limit: memMax ?? limits.memory },
        oomKills: ooms ?? 0
      }
    }
  }
}
