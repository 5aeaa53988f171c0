/*
 * The Kubernetes engine (plugins/sandbox-kubernetes; docs/engine.md#kubernetes) against the shared engine
 * contract (engine-contract.ts) on the fake API server (test/fixtures/fake-kube, in this process: pods run
 * as Docker containers, PVCs as volumes, every object validated against the Kubernetes OpenAPI schemas),
 * then the objects it made read back with an independent client, @kubernetes/client-node. Needs Docker.
 */
import { chmod, mkdir, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import t from 'tap'
import { CoreV1Api, KubeConfig, NetworkingV1Api } from '@kubernetes/client-node'
import { startFakeKube } from '../fixtures/fake-kube/server.js'
import { HOST_PATH } from '../fixtures/fake-kube/pods.js'
import { KubeClient } from '../../plugins/sandbox-kubernetes/kube-client.js'
import { isConflict } from '../../plugins/sandbox-kubernetes/kube-error.js'
import type { SharedStorage } from '../../plugins/sandbox-kubernetes/kube-storage.js'
import type { SandboxEngine } from '../../plugins/sandbox/types.js'
import { createKubeEngine } from '../../plugins/sandbox-kubernetes/kube-engine.js'
import type { KubeConnection } from '../../plugins/sandbox-kubernetes/kube-config.js'
import { engineContract, type ContractStorage } from '../fixtures/engine-contract.js'
import { dockerOrSkip, TEST_IMAGE } from './docker.js'
import { tempDir } from '../fixtures/temp-dir.js'

const PREFIX = 'tengkube'
const NS = 'engine-kube'
const MiB = 1024 * 1024
const { skip } = await dockerOrSkip()

function connection (url: string): KubeConnection {
  return { server: url, namespace: NS, token: () => 'any-bearer-is-accepted', insecureSkipTlsVerify: false, source: 'test' }
}

const SHARED = `${PREFIX}-shared`

function engineAt (url: string, shared?: SharedStorage): ReturnType<typeof createKubeEngine> {
  return createKubeEngine({
    connection: connection(url),
    pod: { uid: 1000, gid: 1000, volumeSize: '1Gi', runtimeClassName: '' },
    server: { selector: { 'app.kubernetes.io/name': 'cubicle' }, address: '10.96.0.10' },
    ...(shared === undefined ? {} : { shared }),
    startTimeoutMs: 120_000
  })
}

/**
 * The shared claim (in a cluster an operator's ReadWriteMany claim, mounted by the server at DATA_DIR) as the
 * fake's host-path claim of `root`, made before the engine's first create.
 */
function withShared (url: string, root: string, s: ContractStorage, claim = SHARED): SandboxEngine {
  const engine = engineAt(url, { claim, root, dataDir: s.dataDir, skillsDir: s.skillsDir })
  const client = new KubeClient(connection(url))
  let made: Promise<void> | undefined
  const ensure = async (): Promise<void> => {
    made ??= client.request('POST', client.path('persistentvolumeclaims'), {
      body: { apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: { name: claim, annotations: { [HOST_PATH]: root } }, spec: { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '1Gi' } } } }
    }).then(() => {}, (err: unknown) => { if (!isConflict(err)) throw err })
    await made
  }
  return { ...engine, create: async spec => { await ensure(); return await engine.create(spec) }, close: () => { client.close(); engine.close() } }
}

t.test('the Kubernetes engine passes the engine contract on the fake API server', { skip }, async t => {
  const kube = await startFakeKube(0, '127.0.0.1', { prefix: PREFIX })
  t.teardown(async () => { await kube.close() })
  const url = `http://127.0.0.1:${(kube.server.address() as { port: number }).port}`
  await t.test('the contract', async t => {
    await engineContract(t, {
      engine: storage => withShared(url, dirname(storage.dataDir), storage),
      unreachable: () => engineAt('http://127.0.0.1:1'),
      image: TEST_IMAGE,
      prefix: PREFIX,
      cannot: { imagePresence: false, pidsLimit: false }
    })
  })

  await t.test('the objects it makes, read back with @kubernetes/client-node', async t => {
    const root = await tempDir(t, `${PREFIX}-objects`)
    const key = '0123456789abcdef0123456789abcdef'
    for (const area of ['uploads', 'outputs']) await mkdir(join(root, 'data', 'chats', key, area), { recursive: true })
    const engine = withShared(url, root, { dataDir: join(root, 'data'), skillsDir: '' }, `${SHARED}-objects`)
    t.teardown(() => { engine.close() })
    const labels = { 'cu.prefix': PREFIX, 'cu.check': 'objects' }
    const made = await engine.create({
      name: `${PREFIX}-objects`,
      image: TEST_IMAGE,
      command: ['sleep', 'infinity'],
      hostname: 'sandbox',
      user: 'assistant',
      workdir: '/home/assistant',
      env: ['A=1'],
      labels,
      storage: { home: { volume: `${PREFIX}-home-objects`, labels }, data: { chat: key }, skills: true, extra: [] },
      tmpfs: { '/tmp': { size: 16 * MiB, mode: 0o1777 } },
      limits: { memory: 256 * MiB, cpus: 0.5, pids: 128, disk: 512 * MiB, shm: 64 * MiB },
      network: `${PREFIX}-net`,
      security: { dropCapabilities: true, noNewPrivileges: true, init: true, disableIpv6: true }
    })
    if (made === 'conflict') { t.fail('conflict'); return }
    await engine.ensureNetwork(`${PREFIX}-net`, { 'cu.prefix': PREFIX })
    await engine.restrictToProxy?.(`${PREFIX}-net`, 3128)
    await engine.start(made.id)
    const kc = new KubeConfig()
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
      users: [{ name: 'test', token: 'any' }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'test', namespace: NS }],
      currentContext: 'fake'
    })
    const core = kc.makeApiClient(CoreV1Api)
    const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: 'cu.check=objects' })
    t.equal(pods.items.length, 1, 'one pod for the running sandbox')
    const pod = pods.items[0]!
    t.equal(pod.metadata?.name, made.id, 'named by the engine\'s id')
    t.equal(pod.spec?.automountServiceAccountToken, false)
    t.equal(pod.spec?.restartPolicy, 'Never')
    t.match(pod.spec?.securityContext, { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } })
    const c = pod.spec?.containers[0]
    t.match(c?.securityContext, { allowPrivilegeEscalation: false, privileged: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } })
    t.same(c?.resources?.limits, { memory: String(256 * MiB), cpu: '500m', 'ephemeral-storage': String(512 * MiB) }, 'limits from the spec')
    t.same(c?.resources?.requests, c?.resources?.limits, 'requests = limits')
    t.same(pod.spec?.volumes?.map(v => v.persistentVolumeClaim?.claimName).filter(n => n !== undefined), [`${PREFIX}-home-objects`, `${SHARED}-objects`], 'the home is its claim, the data areas are on the shared claim')
    t.same(c?.volumeMounts?.filter(m => m.name.startsWith('vol-')).map(m => [m.mountPath, m.subPath ?? '', m.readOnly === true]), [
      ['/home/assistant', '', false],
      ['/mnt/user-data/uploads', 'data/chats/0123456789abcdef0123456789abcdef/uploads', true],
      ['/mnt/user-data/outputs', 'data/chats/0123456789abcdef0123456789abcdef/outputs', false]
    ], 'uploads read-only and outputs by subPath; no skills without SKILLS_DIR on the claim')
    t.equal(pod.metadata?.labels?.['cubicle.network'], `${PREFIX}-net`, 'the network policy selects it by label')
    const pvc = await core.readNamespacedPersistentVolumeClaim({ namespace: NS, name: `${PREFIX}-home-objects` })
    t.match(pvc.spec, { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } })
    const policy = await kc.makeApiClient(NetworkingV1Api).readNamespacedNetworkPolicy({ namespace: NS, name: `${PREFIX}-net` })
    t.same(policy.spec?.policyTypes, ['Ingress', 'Egress'])
    t.same(policy.spec?.ingress?.map(r => r._from?.map(p => p.podSelector?.matchLabels)), [[{ 'app.kubernetes.io/name': 'cubicle' }]], 'only the server reaches sandboxes')
    const egress = policy.spec?.egress ?? []
    t.equal(egress.length, 2, 'DNS and the proxy, nothing else')
    t.same(egress[1]?.ports?.map(p => [p.protocol, p.port]), [['TCP', 3128]], 'restricted to the proxy port')
    t.same(egress[1]?.to?.map(p => p.podSelector?.matchLabels ?? p.ipBlock?.cidr), [{ 'app.kubernetes.io/name': 'cubicle' }, '10.96.0.10/32'], 'to the server\'s pods and address')
    // Pause freezes the processes (SIGSTOP: Kubernetes has no pause): a ticker in the outputs stops growing.
    await chmod(join(root, 'data', 'chats', key, 'outputs'), 0o777)
    const ticker = await engine.exec(made.id, { argv: ['sh', '-c', 'while :; do echo tick >> /mnt/user-data/outputs/tick; sleep 0.05; done'], user: 'assistant' })
    ticker.stdout.resume()
    ticker.stderr.resume()
    const tick = join(root, 'data', 'chats', key, 'outputs', 'tick')
    const size = async (): Promise<number> => await stat(tick).then(s => s.size, () => 0)
    for (let i = 0; i < 100 && await size() === 0; i++) await new Promise(resolve => setTimeout(resolve, 50))
    await engine.pause(made.id)
    const frozen = await size()
    await new Promise(resolve => setTimeout(resolve, 600))
    t.equal(await size(), frozen, 'nothing runs while paused')
    await engine.unpause(made.id)
    await new Promise(resolve => setTimeout(resolve, 600))
    t.ok(await size() > frozen, 'the same processes go on after unpause')
    ticker.close()
    const record = await core.readNamespacedConfigMap({ namespace: NS, name: `${PREFIX}-objects` })
    t.equal(record.data?.id, made.id, 'the record keeps the id')
    // A pod deleted behind the server's back (eviction, kubectl): the engine's pod watch tells the core at once.
    const ended: string[] = []
    const unwatch = engine.watchSandboxes?.(id => { ended.push(id) })
    t.ok(unwatch !== undefined, 'the engine watches its sandboxes')
    await new Promise(resolve => setTimeout(resolve, 300))
    await core.deleteNamespacedPod({ namespace: NS, name: made.id, gracePeriodSeconds: 0 })
    // The API sent the event before its answer to the DELETE: a pod the engine made is told in the
    // event's turn, not after a look-up (its container may still run: a call must not go there).
    await new Promise(resolve => setImmediate(resolve))
    t.ok(ended.includes(made.id), 'a pod deleted outside the server is reported as ended, without a look-up')
    unwatch?.()
    t.match(await engine.inspect(made.id), { running: false, addresses: {} }, 'and the sandbox is stopped, without an address')
    await Promise.all([engine.start(made.id), new Promise(resolve => setTimeout(resolve, 30)).then(async () => { await engine.start(made.id) })])
    t.equal((await engine.inspect(made.id))?.running, true, 'a start brings it back; a second start meanwhile waits for the same pod')
    t.equal((await core.listNamespacedPod({ namespace: NS, labelSelector: 'cu.check=objects' })).items.length, 1, 'one pod')
    await engine.stop(made.id, 0)
    t.equal((await core.listNamespacedPod({ namespace: NS, labelSelector: 'cu.check=objects' })).items.length, 0, 'stop deletes the pod')
    t.equal((await core.readNamespacedPersistentVolumeClaim({ namespace: NS, name: `${PREFIX}-home-objects` })).metadata?.name, `${PREFIX}-home-objects`, 'and keeps the volume')
    await engine.remove(made.id)
    await engine.removeNetwork(`${PREFIX}-net`)
  })
})
