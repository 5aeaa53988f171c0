import { randomBytes } from 'node:crypto'
import { constants } from 'node:fs'
import { lstat, mkdir, open, opendir, readlink, realpath, rename, unlink, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { CHAT_STORAGE_BAD_NAME, CHAT_STORAGE_NOT_DIRECTORY, CHAT_STORAGE_NOT_REGULAR, CHAT_STORAGE_TOO_LARGE } from './errors.js'
import type { StateFiles, StateWriteOptions } from './types.js'
import { errnoCode } from '../../core/errno.js'

/*
 * Small state files the server alone writes (a chat's meta.json and egress.json, the OAuth keys and
 * state). None of them is inside a sandbox mount, but each is still read as if it were hostile: opened
 * without following a symlink (O_NOFOLLOW, O_NONBLOCK so a fifo cannot hang us), checked to be a regular
 * file whose descriptor really lies at the expected place below realpath(DATA_DIR) (no symlinked
 * directory on the way), and read only up to the caller's bound.
 */

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/
const SUFFIX = /^[A-Za-z0-9-]{1,64}$/

export function checkName (name: string): string {
  if (typeof name !== 'string' || !NAME.test(name) || name.includes('..')) throw new CHAT_STORAGE_BAD_NAME(JSON.stringify(String(name)).slice(0, 80))
  return name
}

/** Where a state directory lives and how it is created: `dirs` from the outermost, each made with its mode. */
export interface StateDirSpec {
  root: string
  /** Relative directories below root, outermost first; the last one holds the files. */
  dirs: Array<{ rel: string, mode: number, recursive?: boolean }>
  /** Shown in errors instead of a host path (e.g. `chats/<K>`). */
  label: string
}

/** Confirms through the descriptor that `handle` is exactly `expected` (Linux /proc; elsewhere trusted to O_NOFOLLOW). */
async function atExpectedPlace (handle: FileHandle, expected: string): Promise<boolean> {
  try {
    return await readlink(`/proc/self/fd/${handle.fd}`) === expected
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return true
    throw err
  }
}

export function createStateFiles (spec: StateDirSpec): StateFiles {
  const last = spec.dirs[spec.dirs.length - 1]
  if (last === undefined) throw new TypeError('a state directory needs at least one directory')
  const rel = last.rel
  const dir = join(spec.root, rel)
  const shown = (name: string): string => `${spec.label}/${name}`

  async function ensure (): Promise<void> {
    for (const d of spec.dirs) await mkdir(join(spec.root, d.rel), { recursive: d.recursive ?? true, mode: d.mode })
    const info = await lstat(dir)
    if (!info.isDirectory()) throw new CHAT_STORAGE_NOT_DIRECTORY(spec.label)
  }

  async function openForRead (name: string): Promise<FileHandle | null> {
    try {
      return await open(join(dir, checkName(name)), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
    } catch (err) {
      const code = errnoCode(err)
      if (code === 'ENOENT' || code === 'ENOTDIR') return null
      if (code === 'ELOOP') throw new CHAT_STORAGE_NOT_REGULAR(shown(name), 'a symbolic link, not followed')
      if (code === 'ENXIO') throw new CHAT_STORAGE_NOT_REGULAR(shown(name), 'a fifo or socket')
      throw err
    }
  }

  async function read (name: string, maxBytes: number): Promise<string | null> {
    const handle = await openForRead(name)
    if (handle === null) return null
    try {
      const info = await handle.stat()
      if (!info.isFile()) throw new CHAT_STORAGE_NOT_REGULAR(shown(name), info.isDirectory() ? 'a directory' : 'a special file')
      const expected = join(await realpath(spec.root), rel, name)
      if (!await atExpectedPlace(handle, expected)) throw new CHAT_STORAGE_NOT_REGULAR(shown(name), 'reached through a symbolic link')
      if (info.size > maxBytes) throw new CHAT_STORAGE_TOO_LARGE(shown(name), maxBytes)
      // One byte more than allowed tells a file that grew since fstat from one that fits.
      const buf = Buffer.alloc(Math.min(info.size, maxBytes) + 1)
      let filled = 0
      while (filled < buf.length) {
        const { bytesRead } = await handle.read(buf, filled, buf.length - filled, filled)
        if (bytesRead === 0) break
        filled += bytesRead
      }
      if (filled > maxBytes) throw new CHAT_STORAGE_TOO_LARGE(shown(name), maxBytes)
      return buf.subarray(0, filled).toString('utf8')
    } finally { await handle.close().catch(() => {}) }
  }

  async function write (name: string, text: string, opts: StateWriteOptions): Promise<void> {
    const path = join(dir, checkName(name))
    if (Buffer.byteLength(text, 'utf8') > opts.maxBytes) throw new CHAT_STORAGE_TOO_LARGE(shown(name), opts.maxBytes)
    await ensure()
    const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`
    const handle = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, opts.mode ?? 0o644)
    try {
      await handle.writeFile(text)
      if (opts.sync !== false) await handle.sync()
    } catch (err) {
      await handle.close().catch(() => {})
      await unlink(tmp).catch(() => {})
      throw err
    }
    await handle.close()
    // rename() replaces whatever is at `path`, a planted symlink included, without following it.
    try { await rename(tmp, path) } catch (err) { await unlink(tmp).catch(() => {}); throw err }
  }

  async function list (limit: number): Promise<string[]> {
    try {
      if (!(await lstat(dir)).isDirectory()) throw new CHAT_STORAGE_NOT_DIRECTORY(spec.label)
    } catch (err) {
      if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') return []
      throw err
    }
    const names: string[] = []
    if (limit < 1) return names
    // Iterating a Dir closes it when the loop ends, by break or by throw.
    for await (const entry of await opendir(dir)) {
      if (!entry.isFile() || !NAME.test(entry.name) || entry.name.includes('..')) continue
      names.push(entry.name)
      if (names.length >= limit) break
    }
    return names
  }

  return {
    read,
    list,
    async readJson (name, maxBytes) {
      const text = await read(name, maxBytes)
      return text === null ? null : JSON.parse(text) as unknown
    },
    write,
    async writeJson (name, value, opts) {
      await write(name, `${JSON.stringify(value, null, 2)}\n`, opts)
    },
    async remove (name) {
      await unlink(join(dir, checkName(name))).catch((err: unknown) => { if (errnoCode(err) !== 'ENOENT') throw err })
    },
    async quarantine (name, suffix) {
      if (!SUFFIX.test(suffix)) throw new CHAT_STORAGE_BAD_NAME(JSON.stringify(suffix).slice(0, 80))
      const path = join(dir, checkName(name))
      await rename(path, `${path}.corrupt-${suffix}`)
    },
    ensure
  }
}
