/*
 * a sandbox that swaps a directory of its outputs for a symlink, over and over, while
 * the server walks the tree. The symlinks point at another chat's outputs and at a host directory, both
 * holding files with unique marker names (and a same-named subdirectory, so a walk redirected below the
 * swapped directory would find something). For 10 s the outputs listing, the archive (its plan is a walk)
 * and bash_tool's changed-outputs links are polled: not one name from outside the chat may appear.
 * Real Docker, real HTTP, the SDK client for bash_tool.
 */
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { chatPaths } from '../../core/chat-paths.js'
import { entries } from '../../fastify.config.js'
import { listen } from '../helper.js'
import { readZip } from '../plugins/files/zip-reader.js'
import { client, textOf } from '../plugins/workspace-tools/integration-app.js'
import { dockerOrSkip, removeByPrefix, TEST_IMAGE } from '../integration/docker.js'

const gate = await dockerOrSkip()
const RACE_SECONDS = 10

/** Swaps outputs/real for a symlink to each target in turn, as fast as it can, for argv[1] seconds. */
const SWAPPER = `
import os, sys, time
os.chdir('/mnt/user-data/outputs')
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end:
    for target in sys.argv[2:]:
        os.rename('real', 'real.tmp')
        os.symlink(target, 'real')
        os.unlink('real')
        os.rename('real.tmp', 'real')
        n += 1
print(n)
`

t.test('a sandbox swapping directories for symlinks never leaks foreign names', gate, async t => {
  const prefix = `tr-${randomBytes(3).toString('hex')}`
  const dataDir = await realpath(await mkdtemp(join(tmpdir(), `${prefix}-data-`)))
  const hostDir = await realpath(await mkdtemp(join(tmpdir(), `${prefix}-host-`)))
  t.teardown(async () => {
    await removeByPrefix(prefix)
    await rm(dataDir, { recursive: true, force: true })
    await rm(hostDir, { recursive: true, force: true })
  })
  const mark = randomBytes(4).toString('hex')
  const markers = [`OTHER-CHAT-${mark}`, `HOST-DIR-${mark}`]
  await mkdir(join(hostDir, 'x'))
  await writeFile(join(hostDir, `HOST-DIR-${mark}-top.txt`), 'host')
  await writeFile(join(hostDir, 'x', `HOST-DIR-${mark}-deep.txt`), 'host')

  const { app, url } = await listen(t, { SANDBOX_PREFIX: prefix, DATA_DIR: dataDir, DOCKER_IMAGE: TEST_IMAGE },
    config => entries(config, ['chat-storage', 'mcp-transport', 'capabilities', 'sandbox-docker', 'sandbox', 'workspace-tools', 'files']))
  const sh = async (chat: string, script: string): Promise<string> => {
    const r = await app.sandbox.exec(chat, ['bash', '-c', script], { timeoutMs: 60_000 })
    t.equal(r.exitCode, 0, `sandbox script ran: ${r.stderr.toString()}`)
    return r.stdout.toString()
  }
  const victim = 'race-victim'
  const other = chatPaths(dataDir, 'race-other')
  await Promise.all([app.sandbox.ensure(victim), app.sandbox.ensure('race-other')])
  await sh('race-other', `cd /mnt/user-data/outputs && mkdir x && echo secret > OTHER-CHAT-${mark}-top.txt && echo secret > x/OTHER-CHAT-${mark}-deep.txt`)
  await sh(victim, 'cd /mnt/user-data/outputs && mkdir -p real/x && echo mine > top.txt && echo mine > real/x/victim.txt && echo mine > real/victim.txt')
  // Allowed: the victim's own files, under the directory's name or its temporary one.
  const own = /^(top\.txt|real(\.tmp)?\/(victim\.txt|x\/victim\.txt))$/
  const found = { listing: [] as string[], archive: [] as string[], links: [] as string[] }
  const polls = { listing: 0, archive: 0, bash: 0 }

  const swapping = app.sandbox.exec(victim, ['python3', '-c', SWAPPER, String(RACE_SECONDS),
    `../../${other.key}/outputs`, other.outputs, hostDir], { timeoutMs: (RACE_SECONDS + 30) * 1000 })
  const until = Date.now() + RACE_SECONDS * 1000
  const listing = (async () => {
    while (Date.now() < until) {
      const body = await (await fetch(`${url}/api/outputs/${victim}`)).json() as { files: Array<{ path: string }> }
      for (const f of body.files) if (!own.test(f.path)) found.listing.push(f.path)
      polls.listing++
    }
  })()
  const archive = (async () => {
    while (Date.now() < until) {
      const res = await fetch(`${url}/files/${victim}/archive`)
      // A file that fails its descriptor check mid-stream aborts the zip: keep whatever arrived.
      const chunks: Buffer[] = []
      try { for await (const chunk of res.body ?? []) chunks.push(Buffer.from(chunk as Uint8Array)) } catch {}
      const raw = Buffer.concat(chunks)
      for (const m of markers) if (raw.includes(m)) found.archive.push(`raw bytes contain ${m}`)
      try { for (const e of readZip(raw)) if (!own.test(e.name)) found.archive.push(e.name) } catch {}
      polls.archive++
    }
  })()
  const c = await client(t, url, victim)
  const links = (async () => {
    while (Date.now() < until) {
      const r = await c.callTool({ name: 'bash_tool', arguments: { command: 'echo polled >> /mnt/user-data/outputs/top.txt', description: 'poll' } }) as CallToolResult
      const text = textOf(r)
      for (const m of markers) if (text.includes(m)) found.links.push(text.slice(text.indexOf('[Files created')))
      polls.bash++
    }
  })()
  await Promise.all([listing, archive, links])
  const swapped = await swapping
  t.equal(swapped.exitCode, 0, `swapper ran: ${swapped.stderr.toString().slice(-300)}`)
  const swaps = Number(swapped.stdout.toString().trim())
  t.ok(swaps > 100, `${swaps} swaps in ${RACE_SECONDS} s`)
  t.ok(polls.listing > 10 && polls.archive > 10 && polls.bash > 3, `polled: ${JSON.stringify(polls)}`)
  t.same(found.listing, [], 'the outputs listing shows only the chat\'s own files')
  t.same(found.archive, [], 'the archive holds only the chat\'s own files')
  t.same(found.links, [], 'bash_tool links name only the chat\'s own files')
})
