import { randomBytes } from 'node:crypto'
import type { Duplex } from 'node:stream'
import tar from 'tar-stream'
import type { AdapterContext } from './docker-context.js'
import { DockerError } from './docker-error.js'
import { DockerProcess } from './docker-process.js'
import type { ExecSignal, SandboxEngine } from '../sandbox/types.js'

/*
 * The adapter's exec and file calls: start an exec on a hijacked connection (a DockerProcess:
 * docker-process.ts, with its state, TTY resize and signals), and put one file into a container
 * (docker-client.ts assembles the client).
 */

type ExecCalls = Pick<SandboxEngine, 'exec' | 'putFile'>

/**
 * Every exec carries this variable with its own id, so a signal reaches the exec's processes: Docker
 * has no call to signal an exec, and its inspect reports a host pid that means nothing inside.
 */
export const PROCESS_MARK = 'CUBICLE_ENGINE_EXEC'

/** Signals every process whose environment carries the mark (builtins and one grep: works with few pids left). */
const SIGNAL_SCRIPT = 'for f in $(grep -lzx "$2" /proc/[0-9]*/environ 2>/dev/null); do f=${f#/proc/}; kill -s "$1" "${f%/environ}" 2>/dev/null; done; true'

export function signalArgv (signal: ExecSignal, mark: string): string[] {
  return ['/bin/sh', '-c', SIGNAL_SCRIPT, 'cubicle-signal', signal, `${PROCESS_MARK}=${mark}`]
}

function tarOneFile (path: string, content: Buffer, mode: number, uid: number, gid: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const pack = tar.pack()
    const chunks: Buffer[] = []
    pack.on('data', (c: unknown) => { chunks.push(c as Buffer) })
    pack.on('end', () => resolve(Buffer.concat(chunks)))
    pack.on('error', reject)
    const name = path.slice(path.lastIndexOf('/') + 1)
    pack.entry({ name, size: content.length, mode, uid, gid, mtime: new Date(), type: 'file' }, content, err => {
      if (err !== undefined && err !== null) { reject(err); return }
      pack.finalize()
    })
  })
}

export function execCalls ({ docker, lanes, run }: AdapterContext): ExecCalls {
  const calls: ExecCalls = {
    async exec (containerId, spec) {
      // One exec slot for the set-up (create + start); the stream itself runs outside the lane.
      const admission = { deadline: spec.deadline, signal: spec.signal }
      const release = await lanes.exec.acquire(admission)
      const mark = randomBytes(8).toString('hex')
      try {
        // An exec that was created but never started is inert: creating again is safe.
        const exec = await run('exec', 'exec create', async s => await docker.getContainer(containerId).exec({
          Cmd: spec.argv,
          User: spec.user,
          WorkingDir: spec.cwd,
          Env: [...(spec.env ?? []), `${PROCESS_MARK}=${mark}`],
          AttachStdin: spec.stdin === true,
          AttachStdout: true,
          AttachStderr: true,
          Tty: spec.tty === true,
          abortSignal: s
        }), { ...admission, ungated: true, retry: true })
        const socket = await run('exec', 'exec start', async () => await exec.start({ hijack: true, stdin: spec.stdin === true, Detach: false, Tty: spec.tty === true }),
          { ...admission, ungated: true })
        const id = exec.id
        return new DockerProcess(socket as unknown as Duplex, spec.tty === true, spec.stdin === true, {
          id,
          containerRunning: async () => {
            try {
              const c = await run('read', 'container inspect', async s => await docker.getContainer(containerId).inspect({ abortSignal: s }), { retry: true, dedupKey: `inspect\u0000${containerId}` })
              return c.State.Running === true
            } catch (err) {
              if ((err as DockerError).statusCode === 404) return false
              throw err
            }
          },
          inspect: async () => {
            const info = await run('read', 'exec inspect', async s => await docker.getExec(id).inspect({ abortSignal: s } as {}), { retry: true, dedupKey: `exec\u0000${id}` })
            return { running: info.Running, exitCode: info.Running ? null : (info.ExitCode ?? null), pid: info.Pid }
          },
          resize: async (cols, rows) => {
            if (spec.tty === true) await run('read', 'exec resize', async () => await docker.getExec(id).resize({ w: cols, h: rows } as {}), { ungated: true })
          },
          signal: async signal => {
            const p = await calls.exec(containerId, { argv: signalArgv(signal, mark), user: spec.user, cwd: '/' })
            p.stdout.resume()
            p.stderr.resume()
            await p.exit
          }
        })
      } finally { release() }
    },

    async putFile (containerId, path, content, mode, uid, gid) {
      const dir = path.slice(0, path.lastIndexOf('/')) || '/'
      const archive = await tarOneFile(path, content, mode, uid, gid)
      try {
        // Idempotent: the same archive written again ends in the same file.
        await run('exec', `put archive ${dir}`, async s => await docker.getContainer(containerId).putArchive(archive, { path: dir, abortSignal: s }), { retry: true, timeoutMs: 120_000 })
      } catch (err) {
        const e = err as DockerError
        // 404 without "no such container": the parent directory is missing; 400/403: the write was refused.
        if (!e.unavailable && (e.statusCode === 404 || e.statusCode === 400 || e.statusCode === 403) && e.reason !== 'no-such-sandbox') {
          throw new DockerError(e.message, e.statusCode, false, e, e.busy, e.statusCode === 404 ? 'no-such-path' : 'not-permitted')
        }
        throw e
      }
    }
  }
  return calls
}
