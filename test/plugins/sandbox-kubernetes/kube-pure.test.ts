/*
 * The Kubernetes engine's pure parts (plugins/sandbox-kubernetes; docs/engine.md#kubernetes), no API server:
 * where the API is and how to authenticate (kube-config.ts), failures in the contract's words
 * (kube-error.ts), the exec preamble through the real wrapper script in a local shell (kube-wrapper.ts),
 * the objects made from a spec (kube-objects.ts) and the storage mapped to claims (kube-storage.ts).
 */
import { spawn } from 'node:child_process'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { resolveConnection } from '../../../plugins/sandbox-kubernetes/kube-config.js'
import { networkError, statusError } from '../../../plugins/sandbox-kubernetes/kube-error.js'
import { preamble, wrapperCommand } from '../../../plugins/sandbox-kubernetes/kube-wrapper.js'
import { networkPolicyObject, podObject } from '../../../plugins/sandbox-kubernetes/kube-objects.js'
import { claimMounts, storageSeen, type SharedStorage } from '../../../plugins/sandbox-kubernetes/kube-storage.js'
import type { SandboxSpec } from '../../../plugins/sandbox/types.js'
import { tempDir } from '../../fixtures/temp-dir.js'

const MiB = 1024 * 1024
const KEY = '0123456789abcdef0123456789abcdef'

const spec: SandboxSpec = {
  name: 'p-sbx-one',
  image: 'computer-use-sandbox:latest',
  command: ['sleep', 'infinity'],
  hostname: 'sandbox',
  user: 'assistant',
  workdir: '/home/assistant',
  env: ['A=1', 'B=x=y'],
  labels: { 'cu.prefix': 'p' },
  storage: { home: { volume: 'p-home-one', labels: { 'cu.prefix': 'p' } }, data: { chat: KEY }, skills: true, extra: [{ source: '/data/skills-cache/abc', target: '/mnt/skills/user/x' }] },
  tmpfs: { '/tmp': { size: 16 * MiB, mode: 0o1777 } },
  limits: { memory: 256 * MiB, cpus: 1.5, pids: 128, disk: 0, shm: 64 * MiB },
  network: 'p-net',
  security: { dropCapabilities: true, noNewPrivileges: true, init: true, disableIpv6: true }
}
const shared: SharedStorage = { claim: 'cubicle-data', root: '/data', dataDir: '/data', skillsDir: '/data/skills' }

t.test('the connection: KUBE_API_URL, the service account, the kubeconfig; clear errors', async t => {
  const dir = await tempDir(t, 'kube-pure')
  const none = join(dir, 'no-sa')
  const explicit = resolveConnection({ apiUrl: 'http://127.0.0.1:9/', namespace: 'ns1', kubeconfig: join(dir, 'missing'), serviceAccountDir: none, env: {} })
  t.match(explicit, { server: 'http://127.0.0.1:9', namespace: 'ns1', source: 'KUBE_API_URL' })
  t.equal(explicit.token(), undefined, 'no token without a service account or kubeconfig')

  const sa = join(dir, 'sa')
  await mkdir(sa)
  await writeFile(join(sa, 'token'), 'sa-token\n')
  await writeFile(join(sa, 'namespace'), 'sandboxes')
  await writeFile(join(sa, 'ca.crt'), 'CA')
  const inCluster = resolveConnection({ serviceAccountDir: sa, env: { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '6443' } })
  t.match(inCluster, { server: 'https://10.0.0.1:6443', namespace: 'sandboxes', source: 'the in-cluster service account' })
  t.equal(inCluster.token(), 'sa-token')
  t.equal(inCluster.ca?.toString(), 'CA')

  const kc = join(dir, 'config')
  await writeFile(join(dir, 'tok'), 'file-token')
  await writeFile(kc, [
    'apiVersion: v1', 'kind: Config', 'current-context: c1',
    'contexts: [{name: c1, context: {cluster: k1, user: u1, namespace: team}}, {name: c2, context: {cluster: k1, user: u2}}]',
    'clusters: [{name: k1, cluster: {server: "https://kube.example:443", certificate-authority-data: "Q0E="}}]',
    'users: [{name: u1, user: {tokenFile: tok}}, {name: u2, user: {exec: {command: aws}}}]'
  ].join('\n'))
  const fromFile = resolveConnection({ kubeconfig: kc, serviceAccountDir: none, env: {} })
  t.match(fromFile, { server: 'https://kube.example:443', namespace: 'team' })
  t.equal(fromFile.token(), 'file-token', 'a token file relative to the kubeconfig')
  t.equal(fromFile.ca?.toString(), 'CA')
  t.equal(resolveConnection({ kubeconfig: kc, namespace: 'other', serviceAccountDir: none, env: {} }).namespace, 'other', 'KUBE_NAMESPACE wins')

  const execCfg = join(dir, 'exec-config')
  await writeFile(execCfg, (await readFile(kc, 'utf8')).replace('current-context: c1', 'current-context: c2'))
  t.throws(() => resolveConnection({ kubeconfig: execCfg, serviceAccountDir: none, env: {} }), /exec or auth-provider plugin/)
  t.throws(() => resolveConnection({ kubeconfig: join(dir, 'missing'), serviceAccountDir: none, env: {} }), /set KUBE_API_URL/)
  t.throws(() => resolveConnection({ apiUrl: 'ftp://x', serviceAccountDir: none, kubeconfig: join(dir, 'missing'), env: {} }), /http:\/\/ or https:\/\//)
  t.throws(() => resolveConnection({ apiUrl: 'http://x', namespace: 'Bad_NS', serviceAccountDir: none, kubeconfig: join(dir, 'missing'), env: {} }), /KUBE_NAMESPACE/)
})

t.test('failures in the contract\'s words', async t => {
  t.match(statusError('POST x', 409, { reason: 'AlreadyExists', message: 'taken' }), { statusCode: 409, reason: 'conflict', unavailable: false, busy: false })
  t.match(statusError('GET x', 429, { reason: 'TooManyRequests' }), { busy: true, unavailable: false })
  t.match(statusError('GET x', 504, {}), { busy: true })
  t.match(statusError('GET x', 502, undefined), { unavailable: true, busy: false })
  t.match(statusError('GET x', 422, { reason: 'Invalid', message: 'Pod "x" is invalid: spec' }), { statusCode: 422, reason: undefined, message: /is invalid/ })
  t.match(networkError('GET x', Object.assign(new Error('refused'), { code: 'ECONNREFUSED' })), { unavailable: true, busy: false })
  t.match(networkError('GET x', Object.assign(new Error('reset'), { code: 'ECONNRESET' })), { unavailable: false, busy: true })
  t.match(networkError('exec x', new Error('WebSocket was closed before the connection was established')), { unavailable: false, busy: true }, 'an error without a code under load is not an outage')
  t.match(networkError('GET x', Object.assign(new Error('no such host'), { code: 'ENOTFOUND' })), { unavailable: true, busy: false })
})

t.test('the preamble carries env, directory, argv and stdin through the wrapper script', async t => {
  const run = async (p: Parameters<typeof preamble>[0], input = ''): Promise<{ out: string, code: number | null }> => {
    const cmd = wrapperCommand('-')
    const child = spawn(cmd[0]!, cmd.slice(1), { stdio: ['pipe', 'pipe', 'inherit'], env: { PATH: process.env.PATH } })
    let out = ''
    child.stdout.on('data', (c: Buffer) => { out += c.toString('utf8') })
    child.stdin.end(Buffer.concat([preamble(p), Buffer.from(input)]))
    const code = await new Promise<number | null>(resolve => { child.on('close', resolve) })
    return { out, code }
  }
  const weird = 'line one\nback\\slash "quoted" $HOME `tick` é ✓ \t tab'
  const r = await run({ env: [`W=${weird}`, 'EMPTY=', 'EQ=a=b'], cwd: tmpdir(), argv: ['sh', '-c', 'printf "%s|%s|%s|%s|%s" "$W" "$EMPTY" "$EQ" "$(pwd)" "$1"; cat', 'sh', weird], stdin: true }, 'and stdin')
  t.same(r, { out: `${weird}||a=b|${tmpdir()}|${weird}and stdin`, code: 0 }, 'every byte as given')
  const closed = await run({ env: [], cwd: '/', argv: ['sh', '-c', 'cat; echo "[$_cu_v$_cu_n]"'], stdin: false }, 'not for the process')
  t.same(closed, { out: '[]\n', code: 0 }, 'without stdin the process reads /dev/null, and the wrapper\'s variables are gone')
  t.equal((await run({ env: [], cwd: '/no/such/dir', argv: ['true'], stdin: false })).code, 126, 'a missing directory fails the exec')
  t.throws(() => preamble({ env: ['BAD-NAME=1'], cwd: '/', argv: ['true'], stdin: false }), /environment variable name/)
  t.throws(() => preamble({ env: [], cwd: '/', argv: ['a\0b'], stdin: false }), /NUL/)
  t.throws(() => preamble({ env: [], cwd: '/', argv: [], stdin: false }), /argv is empty/)
  t.notMatch(wrapperCommand('-').join(' '), /W=|line one/, 'the command line is the fixed wrapper')
})

t.test('the pod: strict security, limits, claims by subPath, the network label', async t => {
  const pod = podObject(spec, 'cu-0123456789abcdef0123', spec.labels, { uid: 1000, gid: 1000, volumeSize: '1Gi', runtimeClassName: 'gvisor' }, claimMounts(spec.storage, shared))
  const s = pod.spec as Record<string, unknown> & { containers: Array<Record<string, unknown>>, volumes: unknown[] }
  t.match(s, { restartPolicy: 'Never', automountServiceAccountToken: false, enableServiceLinks: false, shareProcessNamespace: true, runtimeClassName: 'gvisor', securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } } })
  const c = s.containers[0]!
  t.match(c, { args: ['sleep', 'infinity'], securityContext: { allowPrivilegeEscalation: false, privileged: false, capabilities: { drop: ['ALL'] } }, resources: { limits: { memory: String(256 * MiB), cpu: '1500m' } } })
  t.notOk('ephemeral-storage' in (c.resources as { limits: object }).limits, 'no disk limit without one')
  t.same(c.env, [{ name: 'A', value: '1' }, { name: 'B', value: 'x=y' }])
  t.same(s.volumes.filter(v => 'persistentVolumeClaim' in (v as object)), [{ name: 'vol-0', persistentVolumeClaim: { claimName: 'p-home-one' } }, { name: 'vol-1', persistentVolumeClaim: { claimName: 'cubicle-data' } }], 'one volume per claim')
  t.same((c.volumeMounts as Array<{ mountPath: string, subPath?: string, readOnly?: boolean }>).map(m => [m.mountPath, m.subPath ?? '', m.readOnly === true]), [
    ['/home/assistant', '', false],
    ['/mnt/user-data/uploads', `chats/${KEY}/uploads`, true],
    ['/mnt/user-data/outputs', `chats/${KEY}/outputs`, false],
    ['/mnt/skills', 'skills', true],
    ['/mnt/skills/user/x', 'skills-cache/abc', true],
    ['/tmp', '', false],
    ['/dev/shm', '', false]
  ])
  t.equal(pod.metadata.labels?.['cubicle.network'], 'p-net')
})

t.test('storage: refused outside the shared claim or without one; read back for drift', async t => {
  t.throws(() => claimMounts(spec.storage, undefined), /KUBE_SHARED_CLAIM/)
  t.throws(() => claimMounts({ ...spec.storage, extra: [{ source: '/elsewhere', target: '/mnt/x' }] }, shared), /only directories on the shared claim/)
  t.same(claimMounts({ ...spec.storage, skills: true }, { ...shared, skillsDir: '' }).map(m => m.target).includes('/mnt/skills'), false, 'no skills without SKILLS_DIR on the claim')
  t.same(storageSeen(spec.storage, 'cubicle-data', shared), { home: 'p-home-one', data: { chat: KEY }, skills: true, extra: spec.storage.extra })
  t.equal(storageSeen(spec.storage, 'old-claim', shared).data, null, 'another claim than the sandbox\'s: drift')
  t.equal(storageSeen(spec.storage, 'cubicle-data', { ...shared, skillsDir: '' }).skills, null, 'no skills on this engine: cannot tell')
})

t.test('the network policy: nothing in but the server, nothing out but DNS and the server', async t => {
  const open = networkPolicyObject('p-net', {}, { selector: { app: 'cubicle' } }) as { spec: { ingress: unknown[], egress: Array<{ to?: unknown[], ports?: unknown[] }> } }
  t.same(open.spec.ingress, [{ from: [{ podSelector: { matchLabels: { app: 'cubicle' } } }] }])
  t.equal(open.spec.egress.length, 2)
  t.equal(open.spec.egress[1]?.ports, undefined, 'every port of the server before restrictToProxy')
  const narrow = networkPolicyObject('p-net', {}, { selector: { app: 'cubicle' }, address: '192.0.2.7' }, 3128) as typeof open
  t.same(narrow.spec.egress[1], { to: [{ podSelector: { matchLabels: { app: 'cubicle' } } }, { ipBlock: { cidr: '192.0.2.7/32' } }], ports: [{ protocol: 'TCP', port: 3128 }] })
  const nobody = networkPolicyObject('p-net', {}, { address: 'cubicle-egress' }, 3128) as typeof open
  t.same(nobody.spec.ingress, [], 'no server pods named: nothing reaches sandboxes')
  t.equal(nobody.spec.egress.length, 1, 'and a rule without a destination (which would allow everything) is never written')
})
