/*
 * How a Docker exec ended, as DockerProcess reads it (plugins/sandbox-docker/docker-process.ts): a process Docker
 * never started (pid 0) is notStarted, and notRunning too when the container had ended (killed while the exec was
 * set up: dockerd's reason on the stream says so, or the container is found ended right after), so the core starts
 * the sandbox again and runs the call once more. Text a started process printed never counts: the sandbox may
 * write anything.
 */
import { PassThrough } from 'node:stream'
import t from 'tap'
import { DockerProcess } from '../../../plugins/sandbox-docker/docker-process.js'
import type { ExecExit } from '../../../plugins/sandbox/engine-types.js'

/** One frame of Docker's attach framing on stdout. */
function frame (text: string): Buffer {
  const payload = Buffer.from(text)
  const head = Buffer.alloc(8)
  head[0] = 1
  head.writeUInt32BE(payload.length, 4)
  return Buffer.concat([head, payload])
}

interface Docker { pid?: number, exitCode?: number, tty?: boolean, execGone?: boolean, containerRunning?: boolean[] }

/** The process after `output` on its stream, as a Docker answering `d` reports it; `asked`: container looks. */
async function ended (output: string, d: Docker = {}): Promise<ExecExit & { asked: number }> {
  const socket = new PassThrough()
  const running = [...(d.containerRunning ?? [true])]
  let asked = 0
  const p = new DockerProcess(socket, d.tty === true, false, {
    id: EXEC_ID,
    inspect: async () => {
      if (d.execGone === true) throw new Error('(HTTP code 404) no such exec')
      return await Promise.resolve({ running: false, exitCode: d.exitCode ?? 126, pid: d.pid ?? 0 })
    },
    containerRunning: async () => { asked++; return await Promise.resolve(running.length > 1 ? running.shift() as boolean : running[0] as boolean) },
    resize: async () => {},
    signal: async () => {}
  })
  p.stdout.resume()
  p.stderr.resume()
  socket.end(d.tty === true ? Buffer.from(output) : frame(output))
  return { ...await p.exit, asked }
}

const EXEC_ID = 'e'.repeat(64)
const ID = 'a'.repeat(64)

t.test('a start dockerd refused because the container had ended: notStarted and notRunning', async t => {
  for (const reason of [
    'OCI runtime exec failed: exec failed: cannot exec in a stopped container: unknown\r\n',
    'cannot exec in a stopped state: unknown\r\n',
    'cannot exec in a deleted state: unknown\r\n',
    `task ${ID} not found: not found\r\n`,
    'OCI runtime exec failed: exec failed: unable to create new parent process: namespace path: lstat /proc/28348/ns/ipc: no such file or directory: unknown\r\n'
  ]) {
    t.same(await ended(reason), { code: 126, notStarted: true, notRunning: true, asked: 0 }, `${reason.trim()}: said so, the container not asked`)
  }
  t.same(await ended('cannot exec in a stopped state: unknown\r\n', { tty: true }), { code: 126, notStarted: true, notRunning: true, asked: 0 }, 'with a TTY')
  t.same(await ended(`No such exec instance: ${EXEC_ID}\r\n`, { execGone: true }), { code: null, notStarted: true, notRunning: true, asked: 0 },
    'the exec removed with its container before it started')
})

t.test('another refused start: notRunning when the container is found ended within 0.5 s', async t => {
  const setns = 'OCI runtime exec failed: exec failed: unable to start container process: error executing setns process: exit status 1: unknown\r\n'
  t.same(await ended(setns, { containerRunning: [true, true, false] }), { code: 126, notStarted: true, notRunning: true, asked: 3 }, 'dockerd marked it ended a moment later')
  t.same(await ended(setns, { containerRunning: [true] }), { code: 126, notStarted: true, asked: 5 }, 'still running: no pid left, not a stopped sandbox')
  t.same(await ended('OCI runtime exec failed: exec failed: unable to start container process: exec: "nope": executable file not found in $PATH: unknown\r\n', { exitCode: 127, containerRunning: [false] }),
    { code: 127, notStarted: true, asked: 0 }, 'a missing executable (127): the container is not asked')
})

t.test('what a process that ran printed never counts', async t => {
  t.same(await ended('cannot exec in a stopped state: unknown\r\n', { pid: 4242, containerRunning: [false] }), { code: 126, notStarted: false, asked: 0 })
  t.same(await ended(`No such exec instance: ${'f'.repeat(64)}\r\n`, { execGone: true }), { code: null, notStarted: false, asked: 0 }, 'another exec\'s id')
  t.same(await ended(`${'x'.repeat(600)} is not running\n`, { exitCode: 1 }), { code: 1, notStarted: true, asked: 5 }, 'only the first 512 bytes are read for the reason')
})
