import type { Duplex } from 'node:stream'
import tar from 'tar-stream'
import type { AdapterContext } from './docker-context.js'
import { DockerError } from './docker-error.js'
import { dockerDecoder } from './docker-stream.js'
import type { SandboxEngine } from '../sandbox/types.js'

/*
 * The adapter's exec and file calls: start an exec on a hijacked connection, read its state, resize
 * its TTY, and put one file into a container (docker-client.ts assembles the client).
 */

type ExecCalls = Pick<SandboxEngine, 'exec' | 'execInspect' | 'execResize' | 'putFile'>

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
  return {
    async exec (containerId, spec) {
      // One exec slot for the set-up (create + start); the stream itself runs outside the lane.
      const admission = { deadline: spec.deadline, signal: spec.signal }
      const release = await lanes.exec.acquire(admission)
      try {
        // An exec that was created but never started is inert: creating again is safe.
        const exec = await run('exec', 'exec create', async s => await docker.getContainer(containerId).exec({
          Cmd: spec.argv,
          User: spec.user,
          WorkingDir: spec.cwd,
          Env: spec.env,
          AttachStdin: spec.stdin === true,
          AttachStdout: true,
          AttachStderr: true,
          Tty: spec.tty === true,
          abortSignal: s
        }), { ...admission, ungated: true, retry: true })
        const socket = await run('exec', 'exec start', async () => await exec.start({ hijack: true, stdin: spec.stdin === true, Detach: false, Tty: spec.tty === true }),
          { ...admission, ungated: true })
        return { id: exec.id, socket: socket as unknown as Duplex, decoder: dockerDecoder(spec.tty === true) }
      } finally { release() }
    },

    async execInspect (execId) {
      const info = await run('read', 'exec inspect', async s => await docker.getExec(execId).inspect({ abortSignal: s } as {}), { retry: true, dedupKey: `exec\u0000${execId}` })
      return { running: info.Running, exitCode: info.Running ? null : (info.ExitCode ?? null), pid: info.Pid }
    },

    async execResize (execId, cols, rows) {
      await run('read', 'exec resize', async () => await docker.getExec(execId).resize({ w: cols, h: rows } as {}), { ungated: true })
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
}
