// Core helpers: HTML escaping, MIME types, safe paths, descriptor tree walks, the sandbox probe, one group per part, all in one test process (docs/testing.md#the-unit-tiers-time).
import t, { type Test } from 'tap'
import { escapeHtml } from '../../core/html.js'
import { extensionOf, mimeOf } from '../../core/mime.js'
import { lstat, mkdir, realpath, rm, symlink, writeFile, readdir, rename } from 'node:fs/promises'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { openVerified, parseRelPath, resolveInside, walkRegularFiles, walkTree, type WalkEntry, type WalkOptions, type WalkSummary } from '../../core/safe-path.js'
import { Duplex } from 'node:stream'
import { createProbe, type OpenProbeStream } from '../../core/sandbox-probe.js'
import { tempDir } from '../fixtures/temp-dir.js'
import { clockDevice, touchClock } from '../../core/change-clock.js'

t.test('html', async t => {
// one HTML escaper for the preview, terminal, docs and OAuth pages
  t.test('the five HTML-significant characters become entities, the rest stays', async t => {
    t.equal(escapeHtml('<a href="x" title=\'y\'>&</a>'), '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;')
    t.equal(escapeHtml('chat-é 日本 ~_.'), 'chat-é 日本 ~_.')
    t.equal(escapeHtml('&amp;'), '&amp;amp;', 'escaping is not idempotent: applied once, to raw text')
  })
})

t.test('mime', async t => {
  t.test('the extension is lowercased, without the dot, from the last path segment', async t => {
    t.equal(extensionOf('/a/B.PNG'), 'png')
    t.equal(extensionOf('/a/x.tar.gz'), 'gz')
    t.equal(extensionOf('/a/.bashrc'), '', 'a dot-file has no extension')
    t.equal(extensionOf('/a/Makefile'), '')
    t.equal(extensionOf('src/Dockerfile'), 'dockerfile')
    t.equal(extensionOf('dir.v2/README'), '', 'a dot in a directory name is not an extension')
  })

  // one MIME table for serving files and for upload resources (they disagreed on .ts)
  t.test('one MIME table: source code is text/plain, unknown is octet-stream', async t => {
    t.equal(mimeOf('a/b/report.PDF'), 'application/pdf')
    t.equal(mimeOf('notes.txt'), 'text/plain')
    t.equal(mimeOf('code/main.ts'), 'text/plain', '.ts is TypeScript source, not MPEG-TS')
    t.equal(mimeOf('code/App.tsx'), 'text/plain')
    t.equal(mimeOf('script.py'), 'text/x-python')
    t.equal(mimeOf('a.drawio'), 'application/xml')
    t.equal(mimeOf('archive.tar.gz'), 'application/gzip')
    t.equal(mimeOf('Makefile'), 'application/octet-stream')
    t.equal(mimeOf('.bashrc'), 'application/octet-stream')
    t.equal(mimeOf('x.unknownext'), 'application/octet-stream')
    t.equal(mimeOf('dir.html/blob'), 'application/octet-stream', 'the directory does not lend its extension')
  })
})

t.test('safe-path', async t => {
  async function tree (t: Test): Promise<{ root: string, base: string, secret: string }> {
    const root = await realpath(await tempDir(t, 'safe-path'))
    const base = join(root, 'base')
    await mkdir(join(base, 'sub', 'deep'), { recursive: true })
    await writeFile(join(base, 'a.txt'), 'A')
    await writeFile(join(base, 'sub', 'b.json'), '{}')
    await writeFile(join(base, 'sub', 'deep', 'c.bin'), Buffer.alloc(10))
    await writeFile(join(base, '.hidden'), 'h')
    await mkdir(join(base, '.git'))
    await writeFile(join(base, '.git', 'config'), 'x')
    const secret = join(root, 'secret.txt')
    await writeFile(secret, 'TOP SECRET')
    await symlink(secret, join(base, 'link-to-secret'))
    await symlink(root, join(base, 'link-dir'))
    await symlink('/nonexistent/target', join(base, 'dangling'))
    return { root, base, secret }
  }

  const code = (err: unknown): unknown => (err as { code?: string }).code
  const status = (err: unknown): unknown => (err as { statusCode?: number }).statusCode
  /** `{ code, statusCode }` of the rejection, or 'resolved' so an unexpected success fails the assertion. */
  async function failure (p: Promise<unknown>): Promise<unknown> {
    return await p.then(() => 'resolved', (err: unknown) => ({ code: code(err), statusCode: status(err) }))
  }

  t.test('parseRelPath accepts nested paths and keeps percent signs literal', async t => {
    t.same(parseRelPath('sub/nested.json'), ['sub', 'nested.json'])
    t.same(parseRelPath('%252e%252e/x'), ['%252e%252e', 'x'])
    t.same(parseRelPath('%2e%2e'), ['%2e%2e'])
    t.same(parseRelPath('über file.txt'), ['über file.txt'])
  })

  t.test('parseRelPath rejects every docs/contract.md#path-rules violation with 400 CORE_INVALID_PATH', async t => {
    const bad = ['', '/abs', 'a//b', 'a/', '.', '..', 'a/../b', './a', 'a\\b', 'a\u0000b', 'a\nb', 'a\u007fb', 'a\u001fb',
      'x'.repeat(256), `${'a'.repeat(200)}/`.repeat(6) + 'z']
    for (const raw of bad) {
      t.match(await failure(Promise.resolve().then(() => parseRelPath(raw))), { code: 'CORE_INVALID_PATH', statusCode: 400 }, JSON.stringify(raw.slice(0, 20)))
    }
    // 255 bytes is the limit per segment; multibyte characters count in bytes.
    t.same(parseRelPath('x'.repeat(255)).length, 1)
    t.match(await failure(Promise.resolve().then(() => parseRelPath('é'.repeat(128)))), { code: 'CORE_INVALID_PATH' })
  })

  t.test('resolveInside returns the real path of a file inside the base', async t => {
    const { base } = await tree(t)
    t.equal(await resolveInside(base, ['sub', 'b.json']), join(base, 'sub', 'b.json'))
  })

  t.test('resolveInside refuses a symlink that leaves the base with 403', async t => {
    const { base } = await tree(t)
    t.match(await failure(resolveInside(base, ['link-to-secret'])), { statusCode: 403, code: 'CORE_FORBIDDEN' })
    t.match(await failure(resolveInside(base, ['link-dir', 'secret.txt'])), { statusCode: 403 })
    t.match(await failure(resolveInside(base, ['dangling'])), { statusCode: 403 })
    t.match(await failure(resolveInside(base, ['dangling', 'x'])), { statusCode: 403 })
  })

  t.test('resolveInside appends a missing tail for upload targets, inside the base', async t => {
    const { base } = await tree(t)
    t.equal(await resolveInside(base, ['new', 'dir', 'file.txt']), join(base, 'new', 'dir', 'file.txt'))
    t.equal(await resolveInside(base, ['sub', 'new.txt']), join(base, 'sub', 'new.txt'))
    t.match(await failure(resolveInside(base, ['link-dir', 'new.txt'])), { statusCode: 403 })
  })

  t.test('resolveInside answers 404 for a missing base or a file used as a directory', async t => {
    const { root, base } = await tree(t)
    t.match(await failure(resolveInside(join(root, 'nope'), ['a'])), { statusCode: 404, code: 'CORE_PATH_NOT_FOUND' })
    t.match(await failure(resolveInside(base, ['a.txt', 'x'])), { statusCode: 404 })
  })

  t.test('openVerified opens a regular file inside the base and reads it', async t => {
    const { base } = await tree(t)
    const fh = await openVerified(base, join(base, 'a.txt'))
    t.teardown(() => fh.close())
    t.equal((await fh.readFile()).toString(), 'A')
  })

  t.test('openVerified refuses symlinks, directories, fifos and outside files', async t => {
    const { base, secret } = await tree(t)
    const err1 = await openVerified(base, join(base, 'link-to-secret')).catch(e => e)
    t.equal(status(err1), 403, 'final symlink')
    const err2 = await openVerified(base, join(base, 'link-dir', 'secret.txt')).catch(e => e)
    t.equal(status(err2), 403, 'symlinked parent pointing outside (the swap race)')
    const err3 = await openVerified(base, secret).catch(e => e)
    t.equal(status(err3), 403, 'path outside the base')
    const err4 = await openVerified(base, join(base, 'sub')).catch(e => e)
    t.equal(code(err4), 'CORE_PATH_IS_DIRECTORY')
    const err5 = await openVerified(base, join(base, 'missing')).catch(e => e)
    t.equal(status(err5), 404)
    execFileSync('mkfifo', [join(base, 'pipe')])
    const err6 = await openVerified(base, join(base, 'pipe')).catch(e => e)
    t.equal(status(err6), 403, 'fifo refused without hanging')
  })

  t.test('walkRegularFiles lists regular files only and never follows symlinks', async t => {
    const { base } = await tree(t)
    const all = []
    for await (const e of walkRegularFiles(base)) all.push(e.relPath)
    t.same(all.sort(), ['.git/config', '.hidden', 'a.txt', 'sub/b.json', 'sub/deep/c.bin'])
    const visible = []
    for await (const e of walkRegularFiles(base, { skipDot: true })) visible.push(e)
    t.same(visible.map(e => e.relPath).sort(), ['a.txt', 'sub/b.json', 'sub/deep/c.bin'])
    const bin = visible.find(e => e.relPath === 'sub/deep/c.bin')
    t.equal(bin?.size, 10)
    t.ok((bin?.mtimeMs ?? 0) > 0)
    t.equal(bin?.absPath, join(base, 'sub', 'deep', 'c.bin'))
  })

  t.test('a base the caller resolved already (resolvedBase) is still opened without following a symlink', async t => {
    const { root, base } = await tree(t)
    const { symlink } = await import('node:fs/promises')
    const all = []
    for await (const e of walkRegularFiles(base, { resolvedBase: true })) all.push(e.relPath)
    t.same(all.sort(), ['.git/config', '.hidden', 'a.txt', 'sub/b.json', 'sub/deep/c.bin'], 'the same files as a resolving walk')
    await symlink(base, join(root, 'base-link'))
    const via = []
    for await (const e of walkRegularFiles(join(root, 'base-link'), { resolvedBase: true })) via.push(e)
    t.same(via, [], 'a symlink passed as resolved is not followed')
    const resolving = []
    for await (const e of walkRegularFiles(join(root, 'base-link'))) resolving.push(e)
    t.equal(resolving.length, 5, 'while a resolving walk follows the caller\'s symlink to its target')
  })

  t.test('walkRegularFiles stops at the limit and yields nothing for a missing base', async t => {
    const { root, base } = await tree(t)
    let n = 0
    for await (const e of walkRegularFiles(base, { limit: 2 })) { t.ok(e.relPath); n++ }
    t.equal(n, 2)
    const none = []
    for await (const e of walkRegularFiles(join(root, 'missing'))) none.push(e)
    t.same(none, [])
  })
})

/*
 * walkRegularFiles against a tree that changes between listing a directory and examining its entries
 * the afterList hook swaps directories and files for symlinks at exactly that moment,
 * deterministically. Nothing outside the base may come out: no names, no sizes, no mtimes.
 */
t.test('tree-walk', async t => {
  async function tree (t: Test): Promise<{ base: string, secret: string }> {
    const root = await realpath(await tempDir(t, 'tree-walk'))
    const base = join(root, 'outputs')
    await mkdir(join(base, 'd'), { recursive: true })
    await mkdir(join(base, 'deep', 'x'), { recursive: true })
    await writeFile(join(base, 'a.txt'), 'A')
    await writeFile(join(base, 'd', 'inner.txt'), 'I')
    await writeFile(join(base, 'deep', 'x', 'y.txt'), 'Y')
    // "Another chat": a marker file at its top and one below a directory named like the victim's.
    const secret = join(root, 'other-chat')
    await mkdir(join(secret, 'x'), { recursive: true })
    await writeFile(join(secret, 'OTHER-CHAT-MARKER-1.txt'), 'S'.repeat(12345))
    await writeFile(join(secret, 'x', 'OTHER-CHAT-MARKER-2.txt'), 'S'.repeat(54321))
    return { base, secret }
  }

  async function walk (base: string, opts: WalkOptions = {}): Promise<{ files: WalkEntry[], summary: WalkSummary }> {
    const files: WalkEntry[] = []
    const it = walkTree(base, opts)
    for (let step = await it.next(); ; step = await it.next()) {
      if (step.done === true) return { files, summary: step.value }
      files.push(step.value)
    }
  }

  const leaks = (files: WalkEntry[], base: string): WalkEntry[] =>
    files.filter(f => f.relPath.includes('MARKER') || !f.absPath.startsWith(`${base}/`) || f.size === 12345 || f.size === 54321)

  t.test('without changes: every regular file, sorted, files before subdirectories', async t => {
    const { base } = await tree(t)
    const { files, summary } = await walk(base)
    t.same(files.map(f => f.relPath), ['a.txt', 'd/inner.txt', 'deep/x/y.txt'])
    t.same(files.map(f => f.absPath), ['a.txt', 'd/inner.txt', 'deep/x/y.txt'].map(r => join(base, r)))
    t.match(summary, { found: true, entries: 6, exceeded: false, limited: false })
  })

  // a directory swapped for a symlink between readdir and the walk into it.
  t.test('a directory swapped for a symlink after its parent was listed is not followed', async t => {
    const { base, secret } = await tree(t)
    const { files } = await walk(base, {
      afterList: async rel => {
        if (rel !== '') return
        await rm(join(base, 'd'), { recursive: true })
        await symlink(secret, join(base, 'd'))
      }
    })
    t.same(leaks(files, base), [], 'no name or size of the other chat')
    t.same(files.map(f => f.relPath), ['a.txt', 'deep/x/y.txt'])
  })

  t.test('an ancestor swapped while its subtree is walked cannot redirect the walk', async t => {
    const { base, secret } = await tree(t)
    const { files } = await walk(base, {
      afterList: async rel => {
        if (rel !== 'deep') return
        // deep/ is open and listed (it holds x/); now deep becomes a link to a tree that also has x/.
        await rename(join(base, 'deep'), join(base, 'deep.moved'))
        await symlink(secret, join(base, 'deep'))
      }
    })
    t.same(leaks(files, base), [])
    t.notOk(files.some(f => f.relPath.startsWith('deep/')), 'the moved subtree is skipped, not reported under its old name')
  })

  t.test('a file swapped for a symlink after the listing is skipped, its target never stat-ed', async t => {
    const { base, secret } = await tree(t)
    const { files } = await walk(base, {
      afterList: async rel => {
        if (rel !== '') return
        await rm(join(base, 'a.txt'))
        await symlink(join(secret, 'OTHER-CHAT-MARKER-1.txt'), join(base, 'a.txt'))
      }
    })
    t.same(leaks(files, base), [])
    t.same(files.map(f => f.relPath), ['d/inner.txt', 'deep/x/y.txt'])
  })

  t.test('planted symlinks, a base that is missing or a file', async t => {
    const { base, secret } = await tree(t)
    await symlink(secret, join(base, 'link-dir'))
    await symlink(join(secret, 'OTHER-CHAT-MARKER-1.txt'), join(base, 'link-file'))
    await symlink('/etc', join(base, 'etc'))
    const { files } = await walk(base)
    t.same(leaks(files, base), [])
    t.same(files.map(f => f.relPath), ['a.txt', 'd/inner.txt', 'deep/x/y.txt'])
    t.match((await walk(join(base, 'nope'))).summary, { found: false })
    t.match((await walk(join(base, 'a.txt'))).summary, { found: false })
    t.same((await walk(join(base, 'link-dir'))).files.map(f => f.absPath.startsWith(secret)), [true, true],
      'a base given through a symlink is walked at its real path (callers check the base itself)')
  })

  t.test('limits: files (limit), directory entries (maxEntries, reading stops there), depth, dot entries', async t => {
    const { base } = await tree(t)
    await mkdir(join(base, 'many'))
    for (let i = 0; i < 300; i++) await writeFile(join(base, 'many', `f${String(i).padStart(3, '0')}`), '')
    await writeFile(join(base, '.hidden'), 'h')
    t.match((await walk(base, { limit: 2 })), { files: [{ relPath: '.hidden' }, { relPath: 'a.txt' }], summary: { limited: true } })
    const capped = await walk(base, { maxEntries: 100 })
    t.match(capped.summary, { exceeded: true })
    t.ok(capped.summary.entries <= 100, `${capped.summary.entries} entries read`)
    t.match((await walk(base, { maxEntries: 308 })).summary, { exceeded: false, entries: 308 }, 'exactly the budget is fine')
    t.match((await walk(base, { maxEntries: 307 })).summary, { exceeded: true }, 'one more is not')
    t.same((await walk(base, { maxDepth: 1, skipDot: true })).files.map(f => f.relPath), ['a.txt'])
  })

  t.test('open descriptors stay bounded by the depth and are all closed, also after an early stop', async t => {
    const { base } = await tree(t)
    const depth = 20
    const segments = Array.from({ length: depth }, (_, i) => `l${i}`)
    await mkdir(join(base, ...segments), { recursive: true })
    await writeFile(join(base, ...segments, 'bottom.txt'), 'b')
    for (let i = 1; i <= depth; i++) await writeFile(join(base, ...segments.slice(0, i), 'side.txt'), 's')
    const fds = async (): Promise<number> => (await readdir('/proc/self/fd')).length
    const before = await fds()
    let most = 0
    const { files } = await walk(base, { afterList: async () => { most = Math.max(most, await fds()) } })
    t.ok(files.some(f => f.relPath.endsWith('bottom.txt')))
    t.ok(most - before <= depth + 4, `at most ${most - before} descriptors open for a tree ${depth + 1} levels deep`)
    t.equal(await fds(), before, 'all closed at the end')
    for await (const f of walkRegularFiles(base)) if (f.relPath.includes('l5')) break
    t.equal(await fds(), before, 'all closed after a break')
  })

  t.test('without /proc (not Linux) the walk checks each directory by realpath and inode instead', async t => {
    const fsp = await import('node:fs/promises')
    let refused = 0
    const { walkRegularFiles: walkNoProc } = await t.mockImport<typeof import('../../core/tree-walk.js')>('../../core/tree-walk.js', {
      'node:fs/promises': {
        ...fsp,
        readlink: async (path: string) => {
          if (path.startsWith('/proc/self/fd/')) { refused++; throw Object.assign(new Error('no /proc'), { code: 'ENOENT' }) }
          return await fsp.readlink(path)
        }
      }
    })
    const { base, secret } = await tree(t)
    await symlink(secret, join(base, 'link-dir'))
    const plain: WalkEntry[] = []
    for await (const f of walkNoProc(base)) plain.push(f)
    t.same(plain.map(f => f.relPath), ['a.txt', 'd/inner.txt', 'deep/x/y.txt'])
    t.ok(refused >= 4, 'the fallback was taken for every directory')
    const swapped: WalkEntry[] = []
    const afterList = async (rel: string): Promise<void> => {
      if (rel !== 'deep') return
      await rename(join(base, 'deep'), join(base, 'deep.moved'))
      await symlink(secret, join(base, 'deep'))
    }
    for await (const f of walkNoProc(base, { afterList })) swapped.push(f)
    t.same(leaks(swapped, base), [], 'an ancestor swapped for a symlink is still caught')
  })
  t.test('changeTimes: each file\'s changedMs is the latest ctime of it and of the directories between the base and it', async t => {
    const { base } = await tree(t)
    const plain = await walk(base)
    t.notOk(plain.files.some(f => 'changedMs' in f), 'only when asked')
    const first = new Map((await walk(base, { changeTimes: true })).files.map(f => [f.relPath, f.changedMs ?? NaN]))
    const y = await lstat(join(base, 'deep', 'x', 'y.txt'))
    const x = await lstat(join(base, 'deep', 'x'))
    t.equal(first.get('deep/x/y.txt'), Math.max(y.ctimeMs, x.ctimeMs, (await lstat(join(base, 'deep'))).ctimeMs))
    await new Promise(resolve => setTimeout(resolve, 30))
    // A directory renamed: its files move without a change of their own.
    await rename(join(base, 'deep'), join(base, 'moved'))
    const moved = await lstat(join(base, 'moved'))
    const second = new Map((await walk(base, { changeTimes: true })).files.map(f => [f.relPath, f.changedMs ?? NaN]))
    t.equal((await lstat(join(base, 'moved', 'x', 'y.txt'))).ctimeMs, y.ctimeMs, 'the file\'s own ctime did not change')
    t.equal(second.get('moved/x/y.txt'), moved.ctimeMs, 'the renamed directory\'s does')
    t.ok(moved.ctimeMs > (first.get('deep/x/y.txt') ?? Infinity))
    t.equal(second.get('a.txt'), first.get('a.txt'), 'a file at the base keeps its own ctime (the base\'s is not counted)')
  })
})

t.test('change-clock', async t => {
  const root = await realpath(await tempDir(t, 'change-clock'))
  const area = join(root, 'outputs')
  await mkdir(area)
  const dev = await clockDevice(root)
  if (dev === undefined) { t.comment('skipped: the temp directory is not on a local file system'); return }
  const marker = join(root, '.change-clock')
  const pause = async (): Promise<void> => { await new Promise(resolve => setTimeout(resolve, 30)) }

  t.test('a change right after a reading is stamped at least as late; one made a tick before, earlier', async t => {
    await writeFile(join(area, 'before.txt'), 'b')
    await pause()
    for (let i = 0; i < 50; i++) {
      const since = touchClock(marker, area, dev)
      if (since === undefined) throw new Error('no reading')
      await writeFile(join(area, 'after.txt'), String(i))
      const after = await lstat(join(area, 'after.txt'))
      if (after.ctimeMs < since) t.fail(`a change after the reading is stamped ${since - after.ctimeMs} ms earlier`)
      t.ok((await lstat(join(area, 'before.txt'))).ctimeMs < since)
    }
    t.equal((await lstat(marker)).mode & 0o777, 0o600, 'the marker is created 0600')
  })

  t.test('no reading for a missing area or parent, another device, or a symlink in the marker\'s place', async t => {
    t.equal(touchClock(marker, join(root, 'missing'), dev), undefined)
    t.equal(touchClock(join(root, 'gone', '.change-clock'), area, dev), undefined)
    t.equal(touchClock(marker, '/proc', dev), undefined)
    t.equal(touchClock(marker, area, dev + 1), undefined)
    const link = join(root, 'link-marker')
    await writeFile(join(root, 'target'), '')
    await symlink(join(root, 'target'), link)
    t.equal(touchClock(link, area, dev), undefined)
    t.equal(await clockDevice('/proc'), undefined, 'procfs is no local file system for this')
  })
})

t.test('sandbox-probe', async t => {
/** A stream that prints `chunks` (then ends unless `hang`), recording what was opened and closed. */
  function fakeOpen (chunks: Buffer[], hang = false) {
    const opened: Array<{ argv: string[], opts: Parameters<OpenProbeStream>[2] }> = []
    let closed = 0
    let running = 0
    let peak = 0
    const open: OpenProbeStream = async (_chatId, argv, opts) => {
      opened.push({ argv, opts })
      running++
      peak = Math.max(peak, running)
      let sent = false
      const socket = new Duplex({
        read () {
          if (sent) return
          sent = true
          setTimeout(() => {
            for (const c of chunks) this.push(c)
            if (!hang) this.push(null)
          }, 5)
        },
        write (_chunk, _enc, cb) { cb() }
      })
      return { socket, demux: cb => { socket.on('data', cb) }, close: () => { if (!socket.destroyed) { closed++; running-- } socket.destroy() } }
    }
    return { open, opened, closed: () => closed, peak: () => peak }
  }

  const timeout = (): Error => Object.assign(new Error('timed out'), { code: 'X_TIMEOUT' })

  t.test('stdout is kept up to maxBytes, the stream is closed, the sandbox user runs it with EOF on stdin', async t => {
    const fake = fakeOpen([Buffer.alloc(3000, 'a'), Buffer.alloc(3000, 'b')])
    const probe = createProbe(fake.open, 2, 'test', timeout)
    const out = await probe('c1', ['ps'], { timeoutMs: 1000, maxBytes: 4096 })
    t.equal(out.length, 4096, 'cut at maxBytes')
    t.equal(out.subarray(2999, 3001).toString(), 'ab')
    t.equal(fake.closed(), 1)
    t.same(fake.opened[0]?.opts, { user: 'assistant', cwd: '/', tty: false })
    const env = await createProbe(fake.open, 1, 'test', timeout)('c1', ['x'], { timeoutMs: 1000, maxBytes: 10, user: 'root', env: { A: 'b' } })
    t.equal(env.toString(), 'aaaaaaaaaa')
    t.same(fake.opened[1]?.opts, { user: 'root', cwd: '/', tty: false, env: { A: 'b' } })
  })

  t.test('a stuck command is abandoned with the caller\'s error and its stream closed', async t => {
    const fake = fakeOpen([Buffer.from('partial')], true)
    const probe = createProbe(fake.open, 1, 'test', timeout)
    await t.rejects(probe('c1', ['sleep'], { timeoutMs: 50, maxBytes: 100 }), { code: 'X_TIMEOUT' })
    t.equal(fake.closed(), 1)
  })

  t.test('the semaphore bounds probes running at once', async t => {
    const fake = fakeOpen([Buffer.from('ok')])
    const probe = createProbe(fake.open, 3, 'test', timeout)
    const all = await Promise.all(Array.from({ length: 10 }, async () => (await probe('c1', ['true'], { timeoutMs: 1000, maxBytes: 10 })).toString()))
    t.same(all, Array(10).fill('ok'))
    t.equal(fake.peak(), 3, 'never more than 3 at once')
  })

  t.test('a driver without openStream fails at registration', async t => {
    t.throws(() => createProbe(undefined, 1, 'sub-agent', timeout), { message: 'sub-agent: the sandbox driver has no openStream()' })
  })
})
