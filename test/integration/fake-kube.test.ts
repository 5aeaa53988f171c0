/*
 * The fake Kubernetes API server (test/fixtures/fake-kube, docs/testing.md#the-fake-kubernetes-api-server)
 * driven by an independent client, @kubernetes/client-node: pods and PVCs as Docker containers and
 * volumes, label selectors, patches, watch with resume and 410, exec with the status channel,
 * 409/422 Status errors, and SIGTERM removing everything it created. Needs Docker.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { PassThrough, Readable } from 'node:stream'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import Docker from 'dockerode'
import { ApiException, CoreV1Api, Exec, KubeConfig, NetworkingV1Api, PatchStrategy, setHeaderOptions, Watch, type V1Pod, type V1Status } from '@kubernetes/client-node'
import WebSocket from 'ws'
import { rulesFromYaml } from '../fixtures/fake-kube/rbac.js'
import { startFakeKube } from '../fixtures/fake-kube/server.js'
import { dockerOrSkip, TEST_IMAGE } from './docker.js'

const PREFIX = 'tfkube'
const NS = 'cubicle-test'
const root = fileURLToPath(new URL('../..', import.meta.url))
const { skip } = await dockerOrSkip()

async function cleanup (docker: Docker): Promise<void> {
  const filters = JSON.stringify({ label: [`fake-kube.prefix=${PREFIX}`] })
  for (const c of await docker.listContainers({ all: true, filters })) await docker.getContainer(c.Id).remove({ force: true, v: true })
  for (const v of (await docker.listVolumes({ filters })).Volumes ?? []) await docker.getVolume(v.Name).remove({ force: true })
}

async function leftovers (docker: Docker): Promise<{ containers: number, volumes: number }> {
  const filters = JSON.stringify({ label: [`fake-kube.prefix=${PREFIX}`] })
  return { containers: (await docker.listContainers({ all: true, filters })).length, volumes: ((await docker.listVolumes({ filters })).Volumes ?? []).length }
}

/**
 * Starts `npm run fake-kube` (the npm beside this Node first on PATH) in a process group of its own and
 * waits for its `listening` line. The signals of the test go to npm, as an operator's would: the script
 * must hand them to the server (it execs node), else npm exits and leaves the server running.
 */
async function startFake (): Promise<{ url: string, child: ChildProcess, exited: Promise<number | null>, output: () => string }> {
  const env = { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}` }
  const child = spawn('npm', ['run', '--silent', 'fake-kube', '--', '--port', '0', '--prefix', PREFIX, '--history', '40'], { cwd: root, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  const exited = new Promise<number | null>(resolve => { child.once('exit', code => { resolve(code) }) })
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error(`fake-kube did not listen within 60 s:\n${output}`)) }, 60000)
    const onData = (chunk: Buffer): void => {
      output += chunk.toString('utf8')
      const at = output.indexOf('listening on http://')
      if (at < 0) return
      const rest = output.slice(at + 'listening on '.length)
      clearTimeout(timer)
      resolve(rest.slice(0, rest.indexOf(' ')))
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', onData)
    void exited.then(() => { clearTimeout(timer); reject(new Error(`fake-kube exited during start:\n${output}`)) })
  })
  return { url, child, exited, output: () => output }
}

/** Sends `signal` to the process group `child` leads; false when no process of it is left. */
function killGroup (child: ChildProcess, signal: NodeJS.Signals | 0): boolean {
  if (child.pid === undefined) return false // never kill(0): that is the test's own group
  try {
    process.kill(-child.pid, signal)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false
    throw err
  }
}

function kubeConfig (url: string): KubeConfig {
  const kc = new KubeConfig()
  kc.loadFromOptions({
    clusters: [{ name: 'fake', server: url, skipTLSVerify: true }],
    users: [{ name: 'test', token: 'any-bearer-is-accepted' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'test', namespace: NS }],
    currentContext: 'fake'
  })
  return kc
}

/** The API error of a rejected call: its HTTP code and its metav1.Status body. */
async function apiError (p: Promise<unknown>): Promise<{ code: number, status: V1Status & { details?: { causes?: Array<{ field?: string }> } } }> {
  try {
    await p
  } catch (err) {
    if (err instanceof ApiException) return { code: err.code, status: typeof err.body === 'string' ? JSON.parse(err.body) : err.body }
    throw err
  }
  throw new Error('the call succeeded')
}

async function until<T> (what: string, fn: () => Promise<T | undefined>, ms = 60000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

async function exec (kc: KubeConfig, pod: string, command: string[], stdin?: string): Promise<{ stdout: string, stderr: string, status: V1Status }> {
  const out = new PassThrough()
  const err = new PassThrough()
  let stdout = ''
  let stderr = ''
  out.on('data', (c: Buffer) => { stdout += c.toString('utf8') })
  err.on('data', (c: Buffer) => { stderr += c.toString('utf8') })
  const status = await new Promise<V1Status>((resolve, reject) => {
    setTimeout(() => { reject(new Error(`exec ${command.join(' ')}: no status within 60 s (stdout ${JSON.stringify(stdout)})`)) }, 60000).unref()
    new Exec(kc).exec(NS, pod, 'main', command, out, err, stdin === undefined ? null : Readable.from([Buffer.from(stdin)]), false, resolve).catch(reject)
  })
  return { stdout, stderr, status }
}

function sandboxPod (name: string, labels: Record<string, string>, claim?: string): V1Pod {
  return {
    metadata: { name, labels },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 1,
      automountServiceAccountToken: false,
      securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [{
        name: 'main',
        image: TEST_IMAGE,
        command: ['sleep'],
        args: ['infinity'],
        env: [{ name: 'GREETING', value: 'hello from the pod spec' }, { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
        securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
        resources: { limits: { memory: '256Mi', cpu: '500m' }, requests: { memory: '256Mi', cpu: '500m' } },
        volumeMounts: [...(claim === undefined ? [] : [{ name: 'home', mountPath: '/data' }]), { name: 'scratch', mountPath: '/scratch' }]
      }],
      volumes: [...(claim === undefined ? [] : [{ name: 'home', persistentVolumeClaim: { claimName: claim } }]), { name: 'scratch', emptyDir: { sizeLimit: '16Mi' } }]
    }
  }
}

t.test('the fake Kubernetes API server', { skip }, async t => {
  const docker = new Docker()
  await cleanup(docker)
  const fake = await startFake()
  let stopped = false
  t.teardown(async () => {
    if (!stopped) { fake.child.kill('SIGTERM'); await fake.exited }
    killGroup(fake.child, 'SIGKILL') // whatever npm left behind in its group
    await cleanup(docker)
  })
  const kc = kubeConfig(fake.url)
  const core = kc.makeApiClient(CoreV1Api)

  await t.test('PVCs are bound at once and backed by a Docker volume', async t => {
    const pvc = await core.createNamespacedPersistentVolumeClaim({ namespace: NS, body: { metadata: { name: 'home-a', labels: { app: 'cubicle' } }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } } })
    t.equal(pvc.status?.phase, 'Bound')
    t.match(pvc.metadata?.uid, /^[0-9a-f-]{36}$/)
    const read = await core.readNamespacedPersistentVolumeClaim({ name: 'home-a', namespace: NS })
    t.equal(read.spec?.volumeName, `pvc-${pvc.metadata!.uid!}`)
    const list = await core.listNamespacedPersistentVolumeClaim({ namespace: NS, labelSelector: 'app=cubicle' })
    t.same(list.items.map(p => p.metadata?.name), ['home-a'])
    t.equal((await leftovers(docker)).volumes, 1, 'one Docker volume for the claim')
    const conflict = await apiError(core.createNamespacedPersistentVolumeClaim({ namespace: NS, body: { metadata: { name: 'home-a' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } } }))
    t.equal(conflict.code, 409)
    t.equal(conflict.status.reason, 'AlreadyExists')
  })

  let podIp = ''
  await t.test('a pod runs as a container with its security context, limits, volumes and labels', async t => {
    const created = await core.createNamespacedPod({ namespace: NS, body: sandboxPod('sandbox-a', { app: 'cubicle', chat: 'a' }, 'home-a') })
    t.equal(created.status?.phase, 'Pending')
    const running = await until('sandbox-a running', async () => {
      const p = await core.readNamespacedPod({ name: 'sandbox-a', namespace: NS })
      return p.status?.phase === 'Running' ? p : undefined
    })
    podIp = running.status?.podIP ?? ''
    t.match(podIp, /^\d+\.\d+\.\d+\.\d+$/, 'podIP from the container')
    t.same(running.status?.conditions?.find(c => c.type === 'Ready')?.status, 'True')
    t.equal(running.status?.containerStatuses?.[0]?.ready, true)
    t.equal(running.status?.qosClass, 'Guaranteed')
    const id = running.status?.containerStatuses?.[0]?.containerID?.replace('docker://', '') ?? ''
    const info = await docker.getContainer(id).inspect()
    t.equal(info.Config.User, '1000:1000')
    t.equal(info.Config.Labels.chat, 'a', 'pod labels are Docker labels')
    t.equal(info.HostConfig.ReadonlyRootfs, true)
    t.same(info.HostConfig.CapDrop, ['ALL'])
    t.ok(info.HostConfig.SecurityOpt?.includes('no-new-privileges'))
    t.equal(info.HostConfig.Memory, 256 * 1024 * 1024)
    t.equal(info.HostConfig.NanoCpus, 500_000_000)

    const ran = await exec(kc, 'sandbox-a', ['sh', '-c', 'id -u; echo "$GREETING/$POD_NAME"; echo kept > /data/file && cat /data/file; echo tmp > /scratch/x && cat /scratch/x; touch /rootfs-file 2>/dev/null || echo read-only'])
    t.equal(ran.stdout, '1000\nhello from the pod spec/sandbox-a\nkept\ntmp\nread-only\n')
    t.equal(ran.status.status, 'Success')
  })

  await t.test('exec: stdout, stderr, stdin and the exit code on the status channel', async t => {
    const ok = await exec(kc, 'sandbox-a', ['sh', '-c', 'echo out; echo err >&2'])
    t.equal(ok.stdout, 'out\n')
    t.equal(ok.stderr, 'err\n')
    t.same(ok.status, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' })
    const failed = await exec(kc, 'sandbox-a', ['sh', '-c', 'echo before; exit 3'])
    t.equal(failed.stdout, 'before\n')
    t.equal(failed.status.status, 'Failure')
    t.equal(failed.status.reason, 'NonZeroExitCode')
    t.same(failed.status.details?.causes, [{ reason: 'ExitCode', message: '3' }])
    const echoed = await exec(kc, 'sandbox-a', ['cat'], 'typed into stdin')
    t.equal(echoed.stdout, 'typed into stdin', 'v5 closes stdin: cat ends')
    t.equal(echoed.status.status, 'Success')
  })

  await t.test('list with a label selector, merge and strategic merge patches of labels', async t => {
    await core.createNamespacedPod({ namespace: NS, body: { metadata: { name: 'other', labels: { app: 'other' } }, spec: { containers: [{ name: 'main', image: 'fake-kube-no-such-image:1' }] } } })
    const other = await until('other pod waiting', async () => {
      const p = await core.readNamespacedPod({ name: 'other', namespace: NS })
      return p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ErrImagePull' ? p : undefined
    })
    t.equal(other.status?.phase, 'Pending', 'a missing image is ErrImagePull, never pulled')
    t.same((await core.listNamespacedPod({ namespace: NS, labelSelector: 'app=cubicle' })).items.map(p => p.metadata?.name), ['sandbox-a'])
    t.same((await core.listNamespacedPod({ namespace: NS, labelSelector: 'app in (cubicle,other),chat!=a' })).items.map(p => p.metadata?.name), ['other'])
    t.same((await core.listNamespacedPod({ namespace: NS })).items.map(p => p.metadata?.name), ['other', 'sandbox-a'])

    const merged = await core.patchNamespacedPod({ name: 'sandbox-a', namespace: NS, body: { metadata: { labels: { claimed: 'yes' } } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch))
    t.same(merged.metadata?.labels, { app: 'cubicle', chat: 'a', claimed: 'yes' })
    const strategic = await core.patchNamespacedPod({ name: 'sandbox-a', namespace: NS, body: { metadata: { labels: { claimed: null, chat: 'b' } } } }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch))
    t.same(strategic.metadata?.labels, { app: 'cubicle', chat: 'b' })
    const jsonPatched = await core.patchNamespacedPod({ name: 'sandbox-a', namespace: NS, body: [{ op: 'replace', path: '/metadata/labels/chat', value: 'a' }] }, setHeaderOptions('Content-Type', PatchStrategy.JsonPatch))
    t.equal(jsonPatched.metadata?.labels?.chat, 'a')
    t.ok(Number(jsonPatched.metadata?.resourceVersion) > Number(strategic.metadata?.resourceVersion), 'resourceVersion grows')
    const immutable = await apiError(core.patchNamespacedPod({ name: 'sandbox-a', namespace: NS, body: { spec: { restartPolicy: 'Always' } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch)))
    t.equal(immutable.code, 422, 'pod spec is immutable')
  })

  await t.test('Status errors: 404, 409 AlreadyExists, 422 Invalid from the OpenAPI schema', async t => {
    const missing = await apiError(core.readNamespacedPod({ name: 'nope', namespace: NS }))
    t.equal(missing.code, 404)
    t.match(missing.status, { kind: 'Status', status: 'Failure', reason: 'NotFound', message: 'pods "nope" not found', code: 404 })
    const taken = await apiError(core.createNamespacedPod({ namespace: NS, body: sandboxPod('sandbox-a', {}) }))
    t.equal(taken.code, 409)
    t.match(taken.status, { reason: 'AlreadyExists', message: 'pods "sandbox-a" already exists' })
    const bad = sandboxPod('bad-limits', {})
    bad.spec!.containers[0]!.resources = { limits: { memory: 'lots' } }
    const badLimits = await apiError(core.createNamespacedPod({ namespace: NS, body: bad }))
    t.equal(badLimits.code, 422)
    t.equal(badLimits.status.reason, 'Invalid')
    t.ok(badLimits.status.details?.causes?.some(c => c.field?.includes('limits.memory')), 'the cause names the field')
    const badPort = await apiError(core.createNamespacedPod({ namespace: NS, body: { metadata: { name: 'bad-port' }, spec: { containers: [{ name: 'main', image: TEST_IMAGE, ports: [{ containerPort: 'http' as unknown as number }] }] } } }))
    t.equal(badPort.code, 422, 'a string where the schema says integer')
    const badName = await apiError(core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'Not_A_Name' }, data: { a: 'b' } } }))
    t.equal(badName.code, 422)
    t.equal((await core.listNamespacedPod({ namespace: NS, fieldSelector: 'metadata.name=bad-limits' })).items.length, 0, 'nothing stored')
  })

  await t.test('watch: ADDED, MODIFIED, DELETED in order, resume from a resourceVersion, 410 when too old', async t => {
    const watch = new Watch(kc)
    const start = (await core.listNamespacedPod({ namespace: NS, labelSelector: 'w=1' })).metadata?.resourceVersion ?? ''
    const seen: Array<{ type: string, name: string, rv: string }> = []
    const controller = await watch.watch(`/api/v1/namespaces/${NS}/pods`, { labelSelector: 'w=1', resourceVersion: start }, (type, obj: V1Pod) => {
      seen.push({ type, name: obj.metadata?.name ?? '', rv: obj.metadata?.resourceVersion ?? '' })
    }, () => {})
    await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'unwatched' }, data: { a: 'b' } } })
    await core.createNamespacedPod({ namespace: NS, body: { metadata: { name: 'watched', labels: { w: '1' } }, spec: { containers: [{ name: 'main', image: 'fake-kube-no-such-image:1' }] } } })
    await core.patchNamespacedPod({ name: 'watched', namespace: NS, body: { metadata: { annotations: { step: 'two' } } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch))
    await core.deleteNamespacedPod({ name: 'watched', namespace: NS, gracePeriodSeconds: 0 })
    await until('DELETED', async () => seen.some(e => e.type === 'DELETED') ? true : undefined)
    controller.abort()
    t.equal(seen[0]?.type, 'ADDED')
    t.equal(seen[seen.length - 1]?.type, 'DELETED')
    t.ok(seen.slice(1, -1).every(e => e.type === 'MODIFIED') && seen.length >= 3, `in order: ${seen.map(e => e.type).join(' ')}`)
    t.ok(seen.every(e => e.name === 'watched'), 'the selector filters')
    const rvs = seen.map(e => Number(e.rv))
    t.same(rvs, [...rvs].sort((a, b) => a - b), 'resourceVersions increase')

    const resumed: string[] = []
    const again = await watch.watch(`/api/v1/namespaces/${NS}/pods`, { labelSelector: 'w=1', resourceVersion: seen[0]!.rv }, type => { resumed.push(type) }, () => {})
    await until('the replay', async () => resumed.includes('DELETED') ? true : undefined)
    again.abort()
    t.same(resumed, seen.slice(1).map(e => e.type), 'resumes after the given resourceVersion')

    for (let i = 0; i < 45; i++) await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: `filler-${i}` }, data: { i: String(i) } } })
    const gone = await new Promise<{ type: string, obj: V1Status }>((resolve, reject) => {
      watch.watch(`/api/v1/namespaces/${NS}/pods`, { resourceVersion: start }, (type, obj: V1Status) => { resolve({ type, obj }) }, err => { if (err !== null && err !== undefined) reject(err) }).catch(reject)
    })
    t.equal(gone.type, 'ERROR')
    t.match(gone.obj, { kind: 'Status', status: 'Failure', reason: 'Expired', code: 410 })
  })

  await t.test('secrets, configmaps, services and network policies are stored and validated', async t => {
    const secret = await core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'key' }, stringData: { token: 's3cret' } } })
    t.equal(secret.data?.token, Buffer.from('s3cret').toString('base64'))
    t.equal((await core.deleteNamespacedSecret({ name: 'key', namespace: NS })).status, 'Success')
    const svc = await core.createNamespacedService({ namespace: NS, body: { metadata: { name: 'proxy' }, spec: { selector: { app: 'cubicle' }, ports: [{ port: 3128 }] } } })
    t.match(svc.spec?.clusterIP, /^10\.96\./)
    const net = kc.makeApiClient(NetworkingV1Api)
    const policy = await net.createNamespacedNetworkPolicy({ namespace: NS, body: { metadata: { name: 'sandbox-egress' }, spec: { podSelector: { matchLabels: { app: 'cubicle' } }, policyTypes: ['Egress'], egress: [{ to: [{ podSelector: { matchLabels: { app: 'server' } } }], ports: [{ port: 3128, protocol: 'TCP' }] }] } } })
    t.equal(policy.metadata?.name, 'sandbox-egress')
    t.same((await net.listNamespacedNetworkPolicy({ namespace: NS })).items.map(p => p.metadata?.name), ['sandbox-egress'])
    const badPolicy = await apiError(net.createNamespacedNetworkPolicy({ namespace: NS, body: { metadata: { name: 'bad' }, spec: { podSelector: { matchLabels: { app: 'x' } }, policyTypes: 'Egress' as unknown as string[] } } }))
    t.equal(badPolicy.code, 422)
  })

  await t.test('delete: the container goes, the PVC and its data stay', async t => {
    const pod = await core.readNamespacedPod({ name: 'sandbox-a', namespace: NS })
    const id = pod.status?.containerStatuses?.[0]?.containerID?.replace('docker://', '') ?? ''
    const deleting = await core.deleteNamespacedPod({ name: 'sandbox-a', namespace: NS, gracePeriodSeconds: 1 })
    t.ok(deleting.metadata?.deletionTimestamp, 'graceful: marked first')
    await until('pod gone', async () => {
      try { await core.readNamespacedPod({ name: 'sandbox-a', namespace: NS }); return undefined } catch (err) { return err instanceof ApiException && err.code === 404 ? true : undefined }
    })
    t.equal((await docker.listContainers({ all: true, filters: JSON.stringify({ id: [id] }) })).length, 0, 'container removed')
    await core.createNamespacedPod({ namespace: NS, body: sandboxPod('sandbox-a2', { app: 'cubicle' }, 'home-a') })
    await until('sandbox-a2 running', async () => (await core.readNamespacedPod({ name: 'sandbox-a2', namespace: NS })).status?.phase === 'Running' ? true : undefined)
    t.equal((await exec(kc, 'sandbox-a2', ['cat', '/data/file'])).stdout, 'kept\n', 'the claim kept the data')
  })

  await t.test('SIGTERM to the npm process removes every container and volume it created, and nothing runs on', async t => {
    t.ok((await leftovers(docker)).containers >= 1)
    fake.child.kill('SIGTERM')
    t.equal(await fake.exited, 0)
    stopped = true
    t.match(fake.output(), /stopped on SIGTERM: removed \d+ containers and 1 volumes/)
    t.same(await leftovers(docker), { containers: 0, volumes: 0 })
    // esbuild's service process (tsx's) ends on its own when node's pipe to it closes: give it a moment.
    const end = Date.now() + 10000
    while (killGroup(fake.child, 0) && Date.now() < end) await new Promise(resolve => setTimeout(resolve, 100))
    t.equal(killGroup(fake.child, 0), false, 'no process of the npm run is left')
    const refused = await fetch(`${fake.url}/api/v1/namespaces/${NS}/pods`).then(() => 'answered', (err: Error) => err.name)
    t.equal(refused, 'TypeError', 'the port no longer answers')
  })
})

t.test('with --rbac, requests outside the Role of deploy/kubernetes/rbac.yaml are refused as an API server does', { skip }, async t => {
  const kube = await startFakeKube(0, '127.0.0.1', { prefix: `${PREFIX}-rbac`, rbac: rulesFromYaml(readFileSync(join(root, 'deploy/kubernetes/rbac.yaml'), 'utf8')) })
  t.teardown(async () => { await kube.close() })
  const address = kube.server.address()
  const base = `127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`
  const call = async (method: string, path: string, body?: object): Promise<{ code: number, status: V1Status }> => {
    const res = await fetch(`http://${base}${path}`, { method, headers: { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    return { code: res.status, status: await res.json() as V1Status }
  }
  const ns = `/api/v1/namespaces/${NS}`
  t.equal((await call('GET', `${ns}/pods`)).code, 200, 'list pods: granted')
  t.equal((await call('POST', `${ns}/configmaps`, { metadata: { name: 'record' }, data: { a: 'b' } })).code, 201, 'create configmaps: granted')
  const secret = await call('GET', `${ns}/secrets/keys`)
  t.same([secret.code, secret.status.reason, secret.status.message], [403, 'Forbidden', `secrets "keys" is forbidden: User "system:serviceaccount:fake-kube:sandbox-engine" cannot get resource "secrets" in API group "" in the namespace "${NS}"`], 'secrets: not granted, in the API server\'s words')
  t.equal((await call('PATCH', `${ns}/persistentvolumeclaims/home`, { metadata: { labels: { a: 'b' } } })).code, 403, 'patch persistentvolumeclaims: not granted')
  t.equal((await call('GET', `${ns}/pods/sandbox/log`)).code, 403, 'pods/log: not granted')
  t.equal((await call('GET', ns)).code, 403, 'the namespace itself: not granted')
  const upgrade = await new Promise<number>(resolve => {
    const ws = new WebSocket(`ws://${base}${ns}/pods/missing/exec?command=true&stdout=1`, ['v5.channel.k8s.io'])
    ws.on('unexpected-response', (_req, res) => { resolve(res.statusCode ?? 0); res.resume(); ws.terminate() })
    ws.on('open', () => { resolve(101); ws.close() })
    ws.on('error', () => { resolve(-1) })
  })
  t.equal(upgrade, 404, 'pods/exec: granted (get and create), then the missing pod is not found')
  t.same([...kube.authorizer!.used.keys()].sort(), ['create configmaps', 'create pods/exec', 'get pods/exec', 'list pods'], 'what was allowed')
  t.same(kube.authorizer!.refused, ['get secrets', 'patch persistentvolumeclaims', 'get pods/log', 'get namespaces'], 'what was refused')
})
