/*
 * The Kubernetes engine's client (plugins/sandbox-kubernetes: kube-client.ts, kube-exec.ts,
 * kube-process.ts, kube-wrapper.ts) against the fake API server (test/fixtures/fake-kube, in this
 * process): JSON Status errors in the contract's words, bounded answers, watch, and exec over
 * v5.channel.k8s.io and v4 with exit codes, stdin, TTY resize, signals, and nothing of a call's
 * environment or argv in the request URL. Needs Docker (the fake runs pods as containers).
 */
import t from 'tap'
import { startFakeKube, type FakeKube } from '../fixtures/fake-kube/server.js'
import { KubeClient } from '../../plugins/sandbox-kubernetes/kube-client.js'
import { KubeError } from '../../plugins/sandbox-kubernetes/kube-error.js'
import { execCalls } from '../../plugins/sandbox-kubernetes/kube-exec.js'
import { exitOfStatus } from '../../plugins/sandbox-kubernetes/kube-process.js'
import { podObject, volumeObject, type ConfigMap, type Pod } from '../../plugins/sandbox-kubernetes/kube-objects.js'
import { waitPod } from '../../plugins/sandbox-kubernetes/kube-pods.js'
import type { KubeConnection } from '../../plugins/sandbox-kubernetes/kube-config.js'
import type { SandboxSpec } from '../../plugins/sandbox/types.js'
import { collect } from '../fixtures/engine-contract.js'
import { dockerOrSkip, TEST_IMAGE } from './docker.js'

const PREFIX = 'tkclient'
const NS = 'kclient'
const MiB = 1024 * 1024
const { skip } = await dockerOrSkip()

function connection (url: string): KubeConnection {
  return { server: url, namespace: NS, token: () => 'any', insecureSkipTlsVerify: false, source: 'test' }
}

const spec: SandboxSpec = {
  name: 'kclient-one',
  image: TEST_IMAGE,
  command: ['sleep', 'infinity'],
  hostname: 'kclient',
  user: 'assistant',
  workdir: '/home/assistant',
  env: ['FROM_POD=1'],
  labels: { 'cu.prefix': PREFIX },
  storage: { home: { volume: 'kclient-home', labels: { 'cu.prefix': PREFIX } }, data: { chat: '0'.repeat(32) }, skills: false, extra: [] },
  tmpfs: { '/tmp': { size: 16 * MiB, mode: 0o1777 } },
  limits: { memory: 256 * MiB, cpus: 0.5, pids: 128, disk: 0, shm: 64 * MiB },
  network: 'none',
  security: { dropCapabilities: true, noNewPrivileges: true, init: true, disableIpv6: false }
}

t.test('the client against the fake API server', { skip }, async t => {
  const kube: FakeKube = await startFakeKube(0, '127.0.0.1', { prefix: PREFIX })
  t.teardown(async () => { await kube.close() })
  const urls: string[] = []
  kube.server.prependListener('upgrade', (req: { url?: string }) => { urls.push(decodeURIComponent(req.url ?? '')) })
  const url = `http://127.0.0.1:${(kube.server.address() as { port: number }).port}`
  const client = new KubeClient(connection(url))
  t.teardown(() => { client.close() })

  await t.test('Status errors: 404, 409 conflict, 422 with the fields; a bounded answer', async t => {
    const cm: ConfigMap = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'kc-one', labels: { 'cu.prefix': PREFIX } }, data: { a: 'b' } }
    await client.request('POST', client.path('configmaps'), { body: cm })
    const missing = await client.request('GET', client.path('configmaps', 'kc-none')).catch((e: unknown) => e as KubeError)
    t.match(missing, { statusCode: 404, kubeReason: 'NotFound', unavailable: false, busy: false })
    const taken = await client.request('POST', client.path('configmaps'), { body: cm }).catch((e: unknown) => e as KubeError)
    t.match(taken, { statusCode: 409, reason: 'conflict', kubeReason: 'AlreadyExists' })
    const invalid = await client.request('POST', client.path('configmaps'), { body: { ...cm, metadata: { name: 'Not_Valid' } } }).catch((e: unknown) => e as KubeError)
    t.match(invalid, { statusCode: 422, kubeReason: 'Invalid', message: /metadata\.name/ })
    const big = await client.request('GET', client.path('configmaps'), { maxBytes: 64 }).catch((e: unknown) => e as KubeError)
    t.ok(big instanceof KubeError && /exceeds 64 bytes/.test(big.message), 'an answer beyond the budget is refused')
  })

  await t.test('an API server that is not there is unavailable', async t => {
    const dead = new KubeClient(connection('http://127.0.0.1:1'))
    t.teardown(() => { dead.close() })
    t.match(await dead.request('GET', '/version').catch((e: unknown) => e), { unavailable: true, busy: false })
  })

  await t.test('watch: the events of a change in order', async t => {
    const seen: string[] = []
    const list = await client.request<{ metadata: { resourceVersion: string } }>('GET', client.path('configmaps'))
    const w = client.watch<ConfigMap>(client.path('configmaps'), { resourceVersion: list.metadata.resourceVersion, labelSelector: 'w=1' }, ev => { seen.push(`${ev.type} ${ev.object.metadata.name}`); if (ev.type === 'DELETED') w.close() })
    await client.request('POST', client.path('configmaps'), { body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'kc-w', labels: { w: '1' } } } })
    await client.request('PATCH', client.path('configmaps', 'kc-w'), { contentType: 'application/merge-patch+json', body: { data: { x: 'y' } } })
    await client.request('DELETE', client.path('configmaps', 'kc-w'))
    await w.done
    t.same(seen, ['ADDED kc-w', 'MODIFIED kc-w', 'DELETED kc-w'])
  })

  await t.test('exec in a pod: exit codes, streams, stdin, env and argv kept out of the URL, TTY, signals, v4', async t => {
    await client.request('POST', client.path('persistentvolumeclaims'), { body: volumeObject('kclient-home', { 'cu.prefix': PREFIX }, { uid: 1000, gid: 1000, volumeSize: '1Gi' }) })
    const pod = podObject(spec, 'kclient-pod', spec.labels, { uid: 1000, gid: 1000, volumeSize: '1Gi' }, [{ claim: 'kclient-home', target: '/home/assistant', readOnly: false }])
    await client.request('POST', client.path('pods'), { body: pod })
    const running = await waitPod(client, 'kclient-pod', 'running', 120_000)
    t.equal(running?.status?.phase, 'Running')
    const execs = execCalls({ client, user: 'assistant', paused: () => false, explain: async (_id, err) => await Promise.resolve(err) })
    const secret = 'sekrit-value-42'
    const p = await execs.exec('kclient-pod', { argv: ['sh', '-c', 'echo "$SECRET $FROM_POD $(pwd) $(id -u)"; echo "$0" >&2; exit 3', 'an argument with spaces'], cwd: '/tmp', env: [`SECRET=${secret}`] })
    t.same(await collect(p), { stdout: `${secret} 1 /tmp 1000\n`, stderr: 'an argument with spaces\n' })
    t.same(await p.exit, { code: 3, notStarted: false }, 'resolves with its own exit code')
    t.notOk(urls.some(u => u.includes(secret) || u.includes('an argument with spaces')), 'neither the environment nor the argv is in any request URL')
    const cat = await execs.exec('kclient-pod', { argv: ['sh', '-c', 'wc -c; cat /dev/null'], stdin: true })
    t.equal((await collect(cat, 'x'.repeat(3 * MiB))).stdout.trim(), String(3 * MiB), 'megabytes of stdin arrive, then EOF')
    const tty = await execs.exec('kclient-pod', { argv: ['sh', '-c', 'read go; stty size; echo "$T"'], env: ['T=tty-env'], tty: true, stdin: true })
    await tty.resize(120, 40)
    const out = await collect(tty, 'go\n', true)
    t.match(out.stdout, /40 120/, 'resize reaches the terminal')
    t.match(out.stdout, /tty-env/, 'the environment reaches a TTY exec')
    t.notMatch(out.stdout, /cubicle|_cu_/, 'no preamble echoed on the terminal')
    const long = await execs.exec('kclient-pod', { argv: ['sh', '-c', 'trap "echo term; exit 7" TERM; echo ready; while :; do sleep 0.1; done'] })
    await new Promise<void>(resolve => { long.stdout.once('data', () => { resolve() }) })
    await long.signal('TERM')
    t.equal((await long.exit).code, 7, 'TERM reached the process')
    const v4 = execCalls({ client, user: 'assistant', paused: () => false, explain: async (_id, err) => await Promise.resolve(err), protocols: ['v4.channel.k8s.io'] })
    const old = await v4.exec('kclient-pod', { argv: ['sh', '-c', 'echo v4; exit 5'] })
    t.same(await collect(old), { stdout: 'v4\n', stderr: '' })
    t.same(await old.exit, { code: 5, notStarted: false }, 'v4: the exit code from the status channel')
    t.match(await execs.exec('kclient-pod', { argv: ['id'], user: 'root' }).catch((e: unknown) => e), { reason: 'not-permitted' }, 'an exec as another user is refused')
    t.match(await execs.exec('kclient-missing', { argv: ['true'] }).catch((e: unknown) => e), { statusCode: 404 }, 'an exec into a missing pod: its 404')
    t.match(await execs.exec('kclient-pod', { argv: ['true'], signal: AbortSignal.abort() }).catch((e: unknown) => e), { busy: true, message: /cancelled/ }, 'a cancelled call starts nothing')
    t.match(await execs.exec('kclient-pod', { argv: ['true'], deadline: Date.now() - 1000 }).catch((e: unknown) => e), { busy: true, unavailable: false }, 'past its deadline: busy, not an outage')
    const gone = await client.request<Pod>('DELETE', client.path('pods', 'kclient-pod'), { body: { gracePeriodSeconds: 0 } })
    t.equal(gone.metadata.name, 'kclient-pod')
    await waitPod(client, 'kclient-pod', 'gone', 60_000)
  })

  t.test('the status channel read as an exit', async t => {
    t.same(exitOfStatus(Buffer.from('{"status":"Success"}')), { code: 0, notStarted: false })
    t.same(exitOfStatus(Buffer.from('{"status":"Failure","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"137"}]}}')), { code: 137, notStarted: false })
    t.same(exitOfStatus(Buffer.from('{"status":"Failure","message":"OCI runtime exec failed: fork: resource temporarily unavailable"}')), { code: null, notStarted: true })
    t.same(exitOfStatus(Buffer.from('not json')), { code: null, notStarted: false })
    t.same(exitOfStatus(Buffer.from('{"status":"Failure","details":{"causes":[{"reason":"ExitCode","message":"999"}]}}')), { code: null, notStarted: false })
  })
})
