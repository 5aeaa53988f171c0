import { randomBytes } from 'node:crypto'
import { constants, type Stats } from 'node:fs'
import { chmod, lstat, mkdir, open, readdir, rename, rm, unlink, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'

/*
 * The agent socket's run directories on the host (docs/engine.md#the-agent-socket): `<root>/<token>/`
 * per sandbox (0700), holding `key` (0600, the agent's key, so that a restarted server can let the
 * agent back in) and `s/` (0755), the one directory bind-mounted read-only into the sandbox, where the
 * engine listens on `agent.sock`. The token is random, made by the engine at create and kept in the
 * sandbox's label: no path is ever built from a chat's or a user's string. Only the server writes
 * anywhere below the root (the sandbox sees `s/` read-only), and every step still refuses a symlink
 * or a foreign owner: each directory is checked with lstat after mkdir, the socket directory is
 * opened O_NOFOLLOW and the socket bound through that descriptor (/proc/self/fd/N, which also keeps
 * the path under the 108 bytes of a socket address), the key read and written O_NOFOLLOW.
 */

export const TOKEN = /^[0-9a-f]{32}$/
/** Where the sandbox sees `s/` (the image's entrypoint starts the agent when it exists). */
export const AGENT_MOUNT = '/run/cubicle-agent'
export const SOCKET_NAME = 'agent.sock'
export const KEY_BYTES = 32
const SOCKET_DIR = 's'
const uid = process.getuid?.() ?? -1

export class RunDirError extends Error { override name = 'RunDirError' }

function checkToken (token: string): string {
  if (!TOKEN.test(token)) throw new RunDirError('not a run directory token')
  return token
}

/** A directory of ours with `mode`: created if missing, never a symlink or someone else's. */
async function ownDir (path: string, mode: number): Promise<void> {
  await mkdir(path, { mode }).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'EEXIST') throw err })
  const st: Stats = await lstat(path)
  if (!st.isDirectory() || (uid >= 0 && st.uid !== uid)) throw new RunDirError(`${path} is not a directory of this server`)
  if ((st.mode & 0o7777) !== mode) await chmod(path, mode)
}

export class RunDirs {
  /**
   * `root`: where the server writes them (below DATA_DIR); `rootHost`: the same directory as the
   * engine sees it (the bind mount's source).
   */
  constructor (readonly root: string, readonly rootHost: string) {}

  static newToken (): string { return randomBytes(16).toString('hex') }

  /** Creates the sandbox's run directory; answers the bind mount's source. */
  async prepare (token: string): Promise<string> {
    checkToken(token)
    await mkdir(this.root, { recursive: true, mode: 0o700 })
    await ownDir(this.root, 0o700)
    await ownDir(join(this.root, token), 0o700)
    await ownDir(join(this.root, token, SOCKET_DIR), 0o755)
    return join(this.rootHost, token, SOCKET_DIR)
  }

  /** The socket directory as a descriptor (O_NOFOLLOW): bind through `/proc/self/fd/<fd>/agent.sock`. */
  async openSocketDir (token: string): Promise<FileHandle> {
    return await open(join(this.root, checkToken(token), SOCKET_DIR), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW)
  }

  /** The agent's key, or null when none is recorded (or the file is not exactly one). */
  async readKey (token: string): Promise<Buffer | null> {
    let handle: FileHandle
    try {
      handle = await open(join(this.root, checkToken(token), 'key'), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
    } catch { return null }
    try {
      const st = await handle.stat()
      if (!st.isFile() || st.size !== KEY_BYTES) return null
      const buf = Buffer.alloc(KEY_BYTES)
      const { bytesRead } = await handle.read(buf, 0, KEY_BYTES, 0)
      return bytesRead === KEY_BYTES ? buf : null
    } finally { await handle.close() }
  }

  /**
   * Records the key atomically (0600): a server restarted a moment later still knows it (the page cache is
   * shared). No fsync: it is on a new chat's first call (the agent waits for the key) and cost up to 30 ms
   * while Docker starts containers (p90, measured), and it would only keep the key through a crash of the
   * host, which the agent holding it does not survive; a missing or torn key reads as none (readKey).
   */
  async writeKey (token: string, key: Buffer): Promise<void> {
    const dir = join(this.root, checkToken(token))
    const tmp = join(dir, `key.${randomBytes(6).toString('hex')}.tmp`)
    const handle = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)
    try {
      await handle.writeFile(key)
    } catch (err) {
      await handle.close()
      await unlink(tmp).catch(() => {})
      throw err
    }
    await handle.close()
    await rename(tmp, join(dir, 'key'))
  }

  /** Forgets the key (a new start of the sandbox: its agent gets a new one). */
  async dropKey (token: string): Promise<void> {
    await unlink(join(this.root, checkToken(token), 'key')).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'ENOENT') throw err })
  }

  async remove (token: string): Promise<void> {
    await rm(join(this.root, checkToken(token)), { recursive: true, force: true })
  }

  /** Removes the run directories whose token no sandbox carries any more (`live`). */
  async sweep (live: ReadonlySet<string>): Promise<number> {
    let names: string[]
    try { names = await readdir(this.root) } catch { return 0 }
    let n = 0
    for (const name of names) {
      if (!TOKEN.test(name) || live.has(name)) continue
      await this.remove(name)
      n++
    }
    return n
  }
}
