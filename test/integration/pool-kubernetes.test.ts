/*
 * The warm pool on the Kubernetes engine (docs/contract.md#warm-pool): a ready pool pod deleted outside the
 * server (kubectl delete, an eviction) is noticed through the engine's pod watch and replaced at once, before
 * a chat could claim it and before the reaper's next pass (every 30 s); the new chat then claims a live one.
 * The real server against the fake API server (test/fixtures/fake-kube). Needs Docker.
 */
import t from 'tap'
import { build } from '../helper.js'
import { fakeKubeWithSharedClaim } from '../fixtures/fake-kube/with-shared-claim.js'
import { dockerOrSkip, TEST_IMAGE } from './docker.js'

const PREFIX = 'tkpool' // fake-kube's Docker prefix, and the server's SANDBOX_PREFIX
const NS = 'cubicle-pool'
const gate = await dockerOrSkip()

interface Named { metadata: { name: string, uid: string, labels?: Record<string, string> }, data?: Record<string, string>, status?: { phase?: string } }

async function until (what: string, cond: () => boolean, ms: number): Promise<number> {
  const t0 = Date.now()
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  return Date.now() - t0
}

t.test('a ready pool pod deleted outside the server is replaced at once', gate, async t => {
  const { kube, api, env } = await fakeKubeWithSharedClaim(t, NS, { prefix: PREFIX })
  const app = await build(t, {
    ...env,
    DOCKER_IMAGE: TEST_IMAGE,
    SANDBOX_POOL_SIZE: '1',
    ENABLE_NETWORK: 'false'
  })
  const service = app.sandbox
  /** The pool's ready sandbox ids, as the API has their records, and the running pods by name. */
  const poolIds = (): string[] => (kube.store.list('configmaps', NS, () => true, () => true) as unknown as Named[])
    .filter(r => r.metadata.name.startsWith(`${PREFIX}-pool-`)).map(r => r.data?.id ?? '')
  const running = (id: string): boolean => (kube.store.list('pods', NS, () => true, () => true) as unknown as Named[])
    .some(p => p.metadata.name === id && p.status?.phase === 'Running')

  await until('a full pool', () => service.pooled?.() === 1, 180_000)
  const [old] = poolIds()
  t.ok(old !== undefined && running(old), 'one pool pod runs')
  const deleted = await fetch(`${api}/api/v1/namespaces/${NS}/pods/${old ?? ''}?gracePeriodSeconds=0`, { method: 'DELETE' })
  t.equal(deleted.status, 200)
  // Out of the pool and its record removed in the watch event's turn, far below the reaper's 30 s.
  const dropped = await until('the dead pool sandbox removed', () => !poolIds().includes(old ?? ''), 10_000)
  t.pass(`the dead pool sandbox was removed after ${dropped} ms`)
  await until('a new pool sandbox', () => service.pooled?.() === 1 && poolIds().length === 1 && poolIds()[0] !== old, 120_000)
  const [fresh] = poolIds()
  t.ok(fresh !== undefined && running(fresh), 'a new pool pod runs')
  // A new chat claims the live one.
  await service.ensure('pool-k')
  const r = await service.exec('pool-k', ['sh', '-c', 'echo claimed'])
  t.equal(r.stdout.toString(), 'claimed\n')
  t.notOk(poolIds().includes(fresh ?? ''), 'the chat took the new pool sandbox')
})
