/*
 * Every label the sandbox core and the Docker engine set is a valid Kubernetes label (docs/engine.md#labels):
 * the core runs on the in-memory engine (boot: network and prefix lease; the warm pool; a claim; a create),
 * and every label it hands the engine is checked, with the Docker engine's own (the lease holder, the agent
 * socket's token). Earlier versions' values are still read (re-adoption of their sandboxes and leases).
 */
import t from 'tap'
import type { Test } from 'tap'
import pino from 'pino'
import { parseOptions } from '../../../core/config.js'
import { labelValue, rfc3339, validLabelKey, validLabelValue } from '../../../core/label-value.js'
import { createMemoryEngine } from '../../../plugins/sandbox-memory/memory-engine.js'
import { holderLabels, holderOf } from '../../../plugins/sandbox-docker/docker-lease.js'
import { RUN_LABEL } from '../../../plugins/sandbox-docker/docker-agent.js'
import { RunDirs } from '../../../plugins/sandbox-docker/agent-run-dir.js'
import { newHolder, takeoverReason } from '../../../plugins/sandbox/prefix-lease.js'
import { systemClock } from '../../../plugins/sandbox/clock.js'
import { createdAtOf } from '../../../plugins/sandbox/names.js'
import { SandboxOptions } from '../../../plugins/sandbox/schemas.js'
import { createSandboxService } from '../../../plugins/sandbox/service.js'
import type { SandboxEngine } from '../../../plugins/sandbox/types.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'
import { tempDir } from '../../fixtures/temp-dir.js'

/** An image reference with every character a label value may not hold, longer than 63. */
const IMAGE = `registry.example:5000/team/${'img'.repeat(20)}:v1@sha256:${'f'.repeat(64)}`

/** Every label set through `engine`, with where it was set. */
function recording (engine: SandboxEngine): { engine: SandboxEngine, seen: Array<[string, Record<string, string>]> } {
  const seen: Array<[string, Record<string, string>]> = []
  return {
    seen,
    engine: {
      ...engine,
      create: async spec => { seen.push([`create ${spec.name}`, spec.labels], [`home volume of ${spec.name}`, spec.storage.home.labels]); return await engine.create(spec) },
      createVolume: async (name, labels) => { seen.push([`volume ${name}`, labels]); await engine.createVolume(name, labels) },
      ensureNetwork: async (name, labels) => { seen.push([`network ${name}`, labels]); return await engine.ensureNetwork(name, labels) },
      claim: async (id, identity) => { seen.push([`claim as ${identity.name}`, identity.labels]); return await engine.claim(id, identity) },
      acquireLease: async (name, holder, o) => {
        // The Docker engine keeps the holder in its lock container's labels.
        seen.push([`lease ${name}`, o.labels], [`lease holder of ${name} (Docker)`, holderLabels(holder)])
        return await engine.acquireLease(name, holder, o)
      }
    }
  }
}

function checkAll (t: Test, seen: Array<[string, Record<string, string>]>): void {
  t.ok(seen.length >= 6, `labels were set (${seen.length} sets)`)
  for (const [where, labels] of seen) {
    for (const [k, v] of Object.entries(labels)) {
      t.ok(validLabelKey(k), `${where}: key ${k}`)
      t.ok(validLabelValue(v), `${where}: ${k}=${v}`)
    }
  }
}

for (const labelsAtClaim of [true, false]) {
  t.test(`every label the core sets on the engine's objects is a valid Kubernetes label (labelsAtClaim ${String(labelsAtClaim)})`, async t => {
    const dir = await tempDir(t, 'tlabels')
    const memory = createMemoryEngine({ images: [IMAGE], dataDir: dir })
    const { engine, seen } = recording({ ...memory, labelsAtClaim })
    const opts = parseOptions(SandboxOptions, { prefix: 'tlabels', image: IMAGE, dataDir: dir, agent: false, poolSize: 1 }, 'sandbox')
    const service = createSandboxService({ ...opts, storage: createChatStorage({ dataDir: dir }) }, engine, pino({ level: 'silent' }))
    t.teardown(async () => { await service.close() })
    await service.start()
    for (let i = 0; i < 100 && service.pooled?.() !== 1; i++) await new Promise(resolve => setTimeout(resolve, 20))
    t.equal(service.pooled?.(), 1, 'a pool sandbox was made')
    await service.ensure('Label Chat: claimed/ÄÖ')
    await service.ensure(`label-chat-created-${'x'.repeat(100)}`)
    t.ok(seen.some(([where]) => where.startsWith('claim as')), 'a chat claimed the pool sandbox')
    checkAll(t, seen)
    for (const box of memory.sandboxes.values()) {
      for (const [k, v] of Object.entries(box.spec.labels)) t.ok(validLabelKey(k) && validLabelValue(v), `sandbox ${box.name} carries ${k}=${v}`)
    }
  })
}

t.test('the Docker engine\'s own labels: the lease holder and the agent socket\'s token', async t => {
  const holder = newHolder(systemClock)
  const labels = { ...holderLabels(holder), ...holderLabels({ ...holder, host: `${'h'.repeat(70)}.example.com`, id: 'Not Valid:id' }), [RUN_LABEL]: RunDirs.newToken() }
  for (const [k, v] of Object.entries(labels)) t.ok(validLabelKey(k) && validLabelValue(v), `${k}=${v}`)
  t.same(holderOf(holderLabels(holder)), holder, 'the holder reads back as it was (RFC 3339 start time)')
  t.notOk(validLabelValue(holder.startedAt), 'RFC 3339 itself is no label value: the label holds the basic form')
  // A lease container of an earlier version: raw host name, start time with ':'.
  const old = holderOf({ 'cu.lease-holder': holder.id, 'cu.lease-host': 'my-host', 'cu.lease-pid': '42', 'cu.lease-started-at': '2026-01-02T03:04:05Z' })
  t.same(old, { id: holder.id, host: 'my-host', pid: 42, startedAt: '2026-01-02T03:04:05Z' }, 'an earlier version\'s holder is read')
  // Its holder on this host is still recognised for a takeover (raw and label forms of the host name).
  const gone = { holder: { ...holder, pid: 2 ** 22 + 17 }, renewedAt: Date.now(), token: 'x' }
  t.match(takeoverReason(gone, 60_000, Date.now()), /is gone/, 'a holder on this host whose process is gone (label form)')
  const raw = { ...gone, holder: { ...gone.holder, host: (await import('node:os')).hostname() } }
  t.match(takeoverReason(raw, 60_000, Date.now()), /is gone/, 'and in the raw form an earlier version wrote')
})

t.test('label helpers', async t => {
  t.equal(labelValue('a:b'), 'a_b')
  t.equal(labelValue('x'.repeat(70)).length, 63)
  t.equal(createdAtOf({ 'cu.created-at': rfc3339(new Date(0)) }), '1970-01-01T00:00:00Z', 'an earlier version\'s creation time')
  for (const k of ['cu.prefix', 'managed-by', 'example.com/name', 'cubicle.agent-run']) t.ok(validLabelKey(k), k)
  for (const k of ['', '-x', 'a/b/c', 'Example.com/x', `${'k'.repeat(64)}`, 'x/']) t.notOk(validLabelKey(k), `refused: ${k}`)
  for (const v of ['', 'a', 'a-b_c.d', 'x'.repeat(63)]) t.ok(validLabelValue(v), v)
  for (const v of ['-a', 'a-', 'a:b', 'x'.repeat(64), '2026-01-02T03:04:05Z']) t.notOk(validLabelValue(v), `refused: ${v}`)
})
