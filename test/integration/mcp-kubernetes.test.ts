/*
 * The MCP tools on the Kubernetes engine (docs/kubernetes.md), end to end: the real server (the whole
 * manifest, SANDBOX_ENGINE=kubernetes) over real HTTP with the official SDK client, against the fake
 * API server (test/fixtures/fake-kube: pods as Docker containers, claims as volumes) authorizing every
 * request with the Role the deployment ships (deploy/kubernetes/rbac.yaml). bash_tool, the file tools,
 * outputs links, the home kept when the pod is deleted, two chats apart, the web terminal and the
 * browser; and what the engine asked of the API stays inside that Role. Needs Docker.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { chatKey } from '../../core/chat-id.js'
import { build, freePort, TEST_API_KEY } from '../helper.js'
import { connect } from '../fixtures/mcp-probe.js'
import { rulesFromYaml } from '../fixtures/fake-kube/rbac.js'
import { restrictedViolations } from '../fixtures/kube-objects.js'
import type { FakeKube } from '../fixtures/fake-kube/server.js'
import { fakeKubeWithSharedClaim } from '../fixtures/fake-kube/with-shared-claim.js'
import { TermClient } from '../plugins/terminal/integration-app.js'
import { cdpClient, SITE } from './browser-app.js'
import { dockerOrSkip, TEST_IMAGE } from './docker.js'

const PREFIX = 'tkmcp' // fake-kube's Docker prefix, and the server's SANDBOX_PREFIX
const NS = 'cubicle-mcp'
const root = fileURLToPath(new URL('../..', import.meta.url))
const gate = await dockerOrSkip()

interface Pod { metadata: { name: string, labels?: Record<string, string>, uid: string }, status?: { phase?: string, podIP?: string } }

/** The pods of the namespace, as the API lists them. */
function pods (kube: FakeKube): Pod[] {
  return kube.store.list('pods', NS, () => true, () => true) as unknown as Pod[]
}

const text = (r: unknown): string => ((r as CallToolResult).content ?? []).filter(c => c.type === 'text').map(c => (c as { text: string }).text).join('')

t.test('the MCP tools on the Kubernetes engine, under the shipped Role', gate, async t => {
  const { kube, api, env } = await fakeKubeWithSharedClaim(t, NS, { prefix: PREFIX, rbac: rulesFromYaml(await readFile(join(root, 'deploy/kubernetes/rbac.yaml'), 'utf8')) })
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const app = await build(t, {
    ...env,
    DOCKER_IMAGE: TEST_IMAGE,
    MCP_API_KEY: TEST_API_KEY,
    PUBLIC_BASE_URL: url,
    COMMAND_TIMEOUT: '180',
    // The egress proxy is not this test's subject (fake-kube does not enforce NetworkPolicies, and its
    // pods sit on Docker's bridge): sandboxes get no network, the browser opens a page of its own pod.
    ENABLE_NETWORK: 'false'
  })
  await app.listen({ port, host: '127.0.0.1' })
  const clients = new Map<string, Client>()
  const mcp = async (chat: string): Promise<Client> => {
    let c = clients.get(chat)
    if (c === undefined) { c = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': chat }); clients.set(chat, c) }
    return c
  }
  const call = async (chat: string, name: string, args: Record<string, unknown>): Promise<CallToolResult> =>
    await (await mcp(chat)).callTool({ name, arguments: { description: 'test', ...args } }) as CallToolResult
  const bash = async (chat: string, command: string): Promise<string> => text(await call(chat, 'bash_tool', { command }))
  const podsOf = (chat: string): Pod[] => pods(kube).filter(p => p.metadata.labels?.['cu.chat-key'] === chatKey(chat))

  await t.test('bash_tool runs as the sandbox user in its home, in one pod of the chat', async t => {
    t.equal(await bash('kube-a', 'echo "$(id -u) $PWD $((6*7))"'), '1000 /home/assistant 42\n')
    const mine = podsOf('kube-a')
    t.equal(mine.length, 1, 'one pod for the chat, found by its chat-key label')
    t.equal(mine[0]?.status?.phase, 'Running')
  })

  await t.test('create_file, view and str_replace', async t => {
    t.equal(text(await call('kube-a', 'create_file', { path: 'notes.txt', file_text: 'alpha\nbeta\n' })), 'Successfully created /home/assistant/notes.txt (11 bytes)')
    t.match(text(await call('kube-a', 'str_replace', { path: 'notes.txt', old_str: 'beta', new_str: 'gamma' })), /notes\.txt/)
    t.equal(text(await call('kube-a', 'view', { path: 'notes.txt' })), '     1\talpha\n     2\tgamma')
  })

  await t.test('a file in outputs comes back as a link that serves it', async t => {
    const made = text(await call('kube-a', 'create_file', { path: '/mnt/user-data/outputs/report.txt', file_text: 'the report' }))
    const link = /Public URL: (\S+)/.exec(made)?.[1] ?? ''
    t.match(link, `${url}/files/kube-a/`)
    const res = await fetch(link)
    t.equal(res.status, 200)
    t.equal(await res.text(), 'the report')
  })

  await t.test('the home is kept when the pod is deleted: the next call gets a new pod with the same files', async t => {
    await bash('kube-a', 'echo kept > ~/persist.txt')
    const before = podsOf('kube-a')[0]!
    const deleted = await fetch(`${api}/api/v1/namespaces/${NS}/pods/${before.metadata.name}?gracePeriodSeconds=0`, { method: 'DELETE' })
    t.equal(deleted.status, 200)
    const end = Date.now() + 60000
    while (pods(kube).some(p => p.metadata.uid === before.metadata.uid) && Date.now() < end) await new Promise(resolve => setTimeout(resolve, 200))
    // As on Docker after a docker stop (sandbox-recovery.test.ts): the first call starts the sandbox again
    // and says so. The pod leaves the API before its container is killed; the engine's pod watch tells the
    // core at once, so this call does not go into the dying container (and get cut off there).
    const first = await call('kube-a', 'bash_tool', { command: 'cat ~/persist.txt' })
    t.notOk(first.isError, 'the first call after the deletion succeeds')
    t.match(text(first), /^kept\n\n\n\[Note: The sandbox had been stopped outside this server .*it was started again for this command\./, 'the file written before the pod was deleted, and what happened')
    const after = podsOf('kube-a')
    if (after.length !== 1) t.comment(`pods now: ${JSON.stringify(pods(kube).map(p => ({ name: p.metadata.name, uid: p.metadata.uid, phase: p.status?.phase, labels: p.metadata.labels })))}`)
    t.equal(after.length, 1, 'one pod again')
    t.not(after[0]?.metadata.uid, before.metadata.uid, 'a new pod')
  })

  await t.test('two chats: their own pods, homes and processes', async t => {
    t.equal(await bash('kube-a', 'echo secret-a > ~/mine.txt; nohup sleep 3017 >/dev/null 2>&1 & echo started'), 'started\n')
    t.equal(await bash('kube-a', 'cat ~/mine.txt; pgrep -fc "slee[p] 3017"'), 'secret-a\n1\n', 'chat A sees its file and its process')
    t.equal(await bash('kube-b', 'cat ~/mine.txt 2>&1; pgrep -fc "slee[p] 3017" || true'), 'cat: /home/assistant/mine.txt: No such file or directory\n0\n', 'chat B sees neither')
    const a = podsOf('kube-a')
    const b = podsOf('kube-b')
    t.same([a.length, b.length], [1, 1])
    t.not(a[0]?.metadata.name, b[0]?.metadata.name)
    t.not(a[0]?.status?.podIP, b[0]?.status?.podIP, 'each its own address (the egress proxy tells chats apart by it)')
  })

  await t.test('the web terminal types into the chat\'s shell', async t => {
    const term = await TermClient.open(t, url, 'kube-a', app.links.token('kube-a', 'c') as string)
    await term.waitFor(/\$ /, 60000)
    term.type('echo term-$((40+2)) && cat ~/persist.txt\r')
    await term.waitFor(/term-42[^]{0,64}kept/, 30000) // the shell may put escape sequences between
    t.pass('the command ran in the pod, on its home')
    await term.close()
  })

  await t.test('the browser: the model\'s page, reached through the CDP bridge', async t => {
    const opened = await bash('kube-a', SITE)
    const token = app.links.token('kube-a', 'c') as string
    const status = await (await fetch(`${url}/browser/kube-a/status?t=${token}`)).json() as { active: boolean, pages: Array<{ id: string, url: string }> }
    t.equal(status.active, true, `the browser runs (the command's output ends: ${JSON.stringify(opened.slice(-600))})`)
    const page = status.pages.find(p => p.url === 'http://127.0.0.1:8000/index.html')
    t.ok(page, 'the page the model opened')
    const list = await (await fetch(`${url}/browser/kube-a/json?t=${token}`)).json() as Array<{ id: string, webSocketDebuggerUrl: string }>
    const cdp = await cdpClient(t, list.find(x => x.id === page?.id)?.webSocketDebuggerUrl ?? '')
    const title = await cdp.send('Runtime.evaluate', { expression: 'document.title', returnByValue: true })
    t.equal(title.result.value, 'Agent page')
  })

  await t.test('every pod the engine made passes Pod Security restricted (the namespace of deploy/kubernetes enforces it)', async t => {
    const all = kube.store.list('pods', NS, () => true, () => true) as unknown as Array<{ metadata: { name: string }, spec: Parameters<typeof restrictedViolations>[0] & { automountServiceAccountToken?: boolean } }>
    t.ok(all.length >= 2)
    for (const p of all) {
      t.same(restrictedViolations(p.spec), [], `pod ${p.metadata.name}`)
      t.equal(p.spec.automountServiceAccountToken, false, `pod ${p.metadata.name} holds no API token`)
    }
  })

  await t.test('everything the engine asked of the API is inside the shipped Role', async t => {
    t.same(kube.authorizer!.refused, [], 'no request was refused')
    t.ok((kube.authorizer!.used.get('create pods') ?? 0) >= 2, 'pods were created under the Role')
    t.ok((kube.authorizer!.used.get('get pods/exec') ?? 0) >= 1, 'and exec')
    t.comment(`granted and used: ${[...kube.authorizer!.used].map(([k, n]) => `${k} ×${n}`).join(', ')}`)
  })
})
