import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { posix } from 'node:path'

/*
 * The filesystem of an in-memory sandbox: its writable layer, its volumes and tmpfs are trees in
 * memory; a bind mount is the host directory itself (read and, unless read-only, written through
 * node:fs). A path belongs to the mount with the longest matching target.
 */

export interface FileInfo { data: Buffer, mode: number, uid: number, gid: number }

export interface WriteOptions { append: boolean, uid: number, gid: number, mode?: number }

/** A tree of files and directories (a writable layer, a volume, a tmpfs), paths relative to its root ('/' based). */
export class FileTree {
  readonly files = new Map<string, FileInfo>()
  readonly dirs = new Set<string>(['/'])

  constructor (dirs: string[] = []) { for (const d of dirs) this.addDir(d) }

  addDir (path: string): void {
    for (let p = path; !this.dirs.has(p); p = posix.dirname(p)) this.dirs.add(p)
  }

  /** Bytes stored (disk usage reports). */
  get size (): number { let n = 0; for (const f of this.files.values()) n += f.data.length; return n }
}

export type Mount = { target: string, readOnly: boolean } & ({ kind: 'tree', tree: FileTree } | { kind: 'host', source: string })

/** What the base image holds: the directories the core and its commands expect. */
const IMAGE_DIRS = ['/tmp', '/home/assistant', '/mnt/user-data', '/mnt/skills', '/opt', '/usr/bin', '/etc', '/proc', '/sys/fs/cgroup']

export class FsError extends Error {
  constructor (readonly reason: 'no-such-path' | 'read-only' | 'not-permitted', message: string) { super(message) }
}

export class MemoryFs {
  private readonly mounts: Mount[]

  /** `virtual`: files computed when read (the cgroup's counters), owned by root, read-only. */
  constructor (readonly layer: FileTree, mounts: Mount[], private readonly virtual: Record<string, () => string> = {}) {
    for (const d of IMAGE_DIRS) layer.addDir(d)
    for (const m of mounts) layer.addDir(m.target)
    this.mounts = [...mounts].sort((a, b) => b.target.length - a.target.length)
  }

  private locate (path: string): { mount: Mount | null, rel: string } {
    const p = posix.normalize(path)
    for (const m of this.mounts) {
      if (p === m.target || p.startsWith(`${m.target}/`)) return { mount: m, rel: posix.join('/', p.slice(m.target.length)) }
    }
    return { mount: null, rel: p }
  }

  async read (path: string): Promise<FileInfo | null> {
    const computed = this.virtual[posix.normalize(path)]
    if (computed !== undefined) return { data: Buffer.from(computed()), mode: 0o444, uid: 0, gid: 0 }
    const { mount, rel } = this.locate(path)
    if (mount?.kind === 'host') {
      const host = posix.join(mount.source, rel)
      try {
        const [data, s] = await Promise.all([readFile(host), stat(host)])
        return { data, mode: s.mode & 0o7777, uid: s.uid, gid: s.gid }
      } catch { return null }
    }
    return (mount?.kind === 'tree' ? mount.tree : this.layer).files.get(rel) ?? null
  }

  async isDir (path: string): Promise<boolean> {
    const { mount, rel } = this.locate(path)
    if (mount?.kind === 'host') return await stat(posix.join(mount.source, rel)).then(s => s.isDirectory(), () => false)
    return (mount?.kind === 'tree' ? mount.tree : this.layer).dirs.has(rel)
  }

  /** Writes a file; its directory must exist. Throws FsError. */
  async write (path: string, data: Buffer, o: WriteOptions): Promise<void> {
    const { mount, rel } = this.locate(path)
    if (mount?.readOnly === true || this.virtual[posix.normalize(path)] !== undefined) throw new FsError('read-only', `${path}: Read-only file system`)
    if (!await this.isDir(posix.dirname(path))) throw new FsError('no-such-path', `${path}: No such file or directory`)
    if (mount?.kind === 'host') {
      await writeFile(posix.join(mount.source, rel), data, { flag: o.append ? 'a' : 'w', mode: o.mode ?? 0o644 })
      return
    }
    const tree = mount?.kind === 'tree' ? mount.tree : this.layer
    const old = tree.files.get(rel)
    tree.files.set(rel, {
      data: o.append && old !== undefined ? Buffer.concat([old.data, data]) : data,
      mode: o.mode ?? old?.mode ?? 0o644,
      uid: o.mode === undefined ? old?.uid ?? o.uid : o.uid,
      gid: o.mode === undefined ? old?.gid ?? o.gid : o.gid
    })
  }

  async mkdir (path: string): Promise<void> {
    const { mount, rel } = this.locate(path)
    if (mount?.readOnly === true) throw new FsError('read-only', `${path}: Read-only file system`)
    if (mount?.kind === 'host') { await mkdir(posix.join(mount.source, rel), { recursive: true }); return }
    ;(mount?.kind === 'tree' ? mount.tree : this.layer).addDir(rel)
  }

  /** False when there was nothing to remove. */
  async remove (path: string): Promise<boolean> {
    const { mount, rel } = this.locate(path)
    if (mount?.readOnly === true) throw new FsError('read-only', `${path}: Read-only file system`)
    if (mount?.kind === 'host') {
      const host = posix.join(mount.source, rel)
      const there = await stat(host).then(() => true, () => false)
      await rm(host, { recursive: true, force: true })
      return there
    }
    const tree = mount?.kind === 'tree' ? mount.tree : this.layer
    let hit = tree.files.delete(rel)
    for (const k of [...tree.files.keys()]) if (k.startsWith(`${rel}/`)) hit = tree.files.delete(k) || hit
    for (const d of [...tree.dirs]) if (d !== '/' && (d === rel || d.startsWith(`${rel}/`))) hit = tree.dirs.delete(d) || hit
    return hit
  }
}
