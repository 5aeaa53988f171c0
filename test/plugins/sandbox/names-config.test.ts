import t from 'tap'
import { chatKey } from '../../../core/chat-id.js'
import { buildSandboxSpec, configDrift, type SandboxSettings } from '../../../plugins/sandbox/sandbox-spec.js'
import { managedNames } from '../../../plugins/sandbox/env.js'
import { subAgentEnvContributor } from '../../../plugins/sub-agent/env.js'
import { dockerCreateBody } from '../../../plugins/sandbox-docker/docker-create-body.js'
import { hostMounts, storageAsSeen, storageOfMounts } from '../../../core/storage-layout.js'
import { containerLabels, createdAtOf, labelTime, labelValue, ownerFilter, readLabels, rfc3339, sandboxNames, volumeLabels } from '../../../plugins/sandbox/names.js'
import { parseDockerHost } from '../../../plugins/sandbox-docker/docker-endpoint.js'
import { parseOptions } from '../../../core/config.js'
import { SandboxOptions } from '../../../plugins/sandbox/schemas.js'

const settings: SandboxSettings = {
  image: 'computer-use-sandbox:latest',
  prefix: 'cu',
  networkMode: 'cu-sandboxes',
  memLimit: 2147483648,
  cpuLimit: 1.5,
  pidsLimit: 512,
  sandboxEnv: { ANTHROPIC_AUTH_TOKEN: 'tok', ANTHROPIC_BASE_URL: 'https://gw.example' },
  // The sub-agent plugin's contributor: SUBAGENT_CLI in, provider credentials withheld.
  envContributors: [subAgentEnvContributor('claude')],
  diskLimit: 0
}
const MANAGED = managedNames(settings.envContributors)
/** An existing sandbox that matches `settings` but for env and storage. */
const DETAILS = { imageId: 'sha256:a', network: 'cu-sandboxes', memory: 2147483648, cpus: 1.5, pids: 512, tmpfs: {}, diskQuota: 0 }

t.test('names derive from the chat key only (docs/contract.md#derived-names)', async t => {
  const key = chatKey('My-Chat'.toLowerCase())
  const n = sandboxNames('cu', 'my-chat')
  t.equal(n.key, key)
  t.match(key, /^[0-9a-f]{32}$/)
  t.equal(n.container, `cu-sbx-${key}`)
  t.equal(n.volume, `cu-home-${key}`)
  t.equal(n.hostname, 'sandbox', 'one hostname for every sandbox (a claimed pool sandbox needs no change)')
  t.notMatch(n.container + n.volume + n.hostname, /my-chat/)
  t.equal(sandboxNames('cu', 'local:9fz_x-1').container.length, 'cu-sbx-'.length + 32)
})

const K8S_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/

t.test('labels: the chat key only where the engine labels at claim, never the raw chat id; valid Kubernetes values', async t => {
  const created = new Date('2026-01-02T03:04:05.678Z')
  const owner = { 'managed-by': 'computer-use-server', tool: 'computer-use-mcp', 'cu.prefix': 'cu' }
  t.same(containerLabels('cu', 'abc', 'img:1', created), { ...owner, 'cu.created-at': '20260102T030405Z', 'cu.image': 'img_1' })
  t.same(containerLabels('cu', 'abc', 'img:1', created, true), { ...owner, 'cu.chat-key': chatKey('abc'), 'cu.created-at': '20260102T030405Z', 'cu.image': 'img_1' })
  t.same(volumeLabels('cu', 'abc'), owner)
  t.same(volumeLabels('cu', 'abc', true), { ...owner, 'cu.chat-key': chatKey('abc') })
  const odd = 'Chat:With/Odd Chars@and-a-very-long-tail-' + 'x'.repeat(80)
  for (const v of Object.values(containerLabels('cu', odd, `registry.example:5000/team/${'img'.repeat(30)}@sha256:${'f'.repeat(64)}`, created, true))) {
    t.match(v, K8S_VALUE, `valid: ${v}`)
  }
  t.notOk(JSON.stringify(containerLabels('cu', odd, 'i', created, true)).includes('Chat:'), 'no raw chat id')
  t.equal(labelValue('computer-use-sandbox:latest'), 'computer-use-sandbox_latest')
  t.equal(labelValue('-_.x:'), 'x', 'alphanumeric at both ends')
  t.equal(labelTime(created), '20260102T030405Z')
  t.equal(createdAtOf({ 'cu.created-at': '20260102T030405Z' }), '2026-01-02T03:04:05Z')
  t.equal(createdAtOf({ 'cu.created-at': '2026-01-02T03:04:05Z' }), '2026-01-02T03:04:05Z', 'the form of earlier versions is read too')
  t.equal(createdAtOf({}), undefined)
  t.equal(rfc3339(created), '2026-01-02T03:04:05Z')
  t.same(ownerFilter('cu'), ['managed-by=computer-use-server', 'cu.prefix=cu'])
})

t.test('re-adoption of sandboxes labelled by earlier versions accepts consistent labels only', async t => {
  const good = { ...containerLabels('cu', 'abc', 'img', new Date()), 'cu.chat-id': 'abc', 'cu.chat-key': chatKey('abc') }
  t.match(readLabels('cu', good), { ok: true, chatId: 'abc', key: chatKey('abc') })
  t.match(readLabels('other', good), { ok: false, reason: 'not ours' })
  t.match(readLabels('cu', { ...good, 'cu.chat-key': chatKey('xyz') }), { ok: false, reason: /does not match/ })
  t.match(readLabels('cu', { ...good, 'cu.chat-id': 'A B', 'cu.chat-key': chatKey('A B') }), { ok: false, reason: /not a valid chat id/ })
  t.match(readLabels('cu', { 'managed-by': 'computer-use-server', 'cu.prefix': 'cu' }), { ok: false, reason: /missing/ })
  t.match(readLabels('cu', undefined), { ok: false })
})

t.test('container config follows docs/contract.md#sandbox-configuration', async t => {
  const now = new Date('2026-03-04T05:06:07Z')
  const user = { email: 'ann@example.com', emailRejected: false, name: 'Ann Example', mcpServers: [], credentials: { gitlabToken: 'glpat', gitlabHost: 'git.example' } }
  // The Docker engine's create body of the neutral spec: every field as before the split.
  const key = chatKey('chat-1')
  const spec = buildSandboxSpec(settings, 'chat-1', user, now)
  t.same(spec.storage, { home: { volume: `cu-home-${key}`, labels: volumeLabels('cu', 'chat-1') }, data: { chat: key }, skills: true, extra: [] }, 'storage by name, no host path')
  const c = dockerCreateBody(spec, hostMounts(spec.storage, { data: '/srv/cubicle', skills: '' }))
  t.equal(c.name, `cu-sbx-${key}`)
  t.equal(c.Image, 'computer-use-sandbox:latest')
  t.same(c.Cmd, ['sleep', 'infinity'])
  t.notOk('Entrypoint' in c, 'the image entrypoint is kept')
  t.equal(c.User, 'assistant')
  t.equal(c.WorkingDir, '/home/assistant')
  t.equal(c.Hostname, 'sandbox')
  t.equal(c.Labels['cu.created-at'], '20260304T050607Z')
  const hc = c.HostConfig
  t.equal(hc.Memory, 2147483648)
  t.equal(hc.MemorySwap, 2147483648)
  t.equal(hc.NanoCpus, 1_500_000_000)
  t.equal(hc.PidsLimit, 512)
  t.same(hc.SecurityOpt, ['no-new-privileges:true'])
  t.same(hc.CapDrop, ['ALL'])
  t.equal(hc.Privileged, false)
  t.equal(hc.Init, true)
  t.equal(hc.ShmSize, 256 * 1024 * 1024)
  t.same(hc.LogConfig, { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } })
  t.same(hc.RestartPolicy, { Name: 'no' })
  t.equal(hc.NetworkMode, 'cu-sandboxes')
  t.notOk('PortBindings' in hc, 'no published ports')
  t.notOk('Binds' in hc)
  t.same(hc.Mounts.map(m => [m.Type, m.Source, m.Target, m.ReadOnly]), [
    ['volume', `cu-home-${key}`, '/home/assistant', false],
    ['bind', `/srv/cubicle/chats/${key}/uploads`, '/mnt/user-data/uploads', true],
    ['bind', `/srv/cubicle/chats/${key}/outputs`, '/mnt/user-data/outputs', false]
  ])
  t.same(hc.Mounts[0]?.VolumeOptions?.Labels, volumeLabels('cu', 'chat-1'))
  // Provider credentials in sandboxEnv never reach the container's environment: only sub_agent runs get them.
  t.same(c.Env.sort(), [
    'CHAT_ID=chat-1',
    'GITLAB_HOST=git.example', 'GITLAB_TOKEN=glpat',
    'GIT_AUTHOR_EMAIL=ann@example.com', 'GIT_AUTHOR_NAME=Ann Example', 'GIT_COMMITTER_EMAIL=ann@example.com', 'GIT_COMMITTER_NAME=Ann Example',
    'SUBAGENT_CLI=claude'
  ].sort())
})

t.test('container config: skills mount, network none, no user', async t => {
  const spec = buildSandboxSpec({ ...settings, networkMode: 'none', sandboxEnv: {} }, 'x', undefined, new Date())
  const c = dockerCreateBody(spec, hostMounts(spec.storage, { data: '/srv/cubicle', skills: '/opt/skills' }))
  t.equal(c.HostConfig.Sysctls, undefined, 'no network: no IPv6 sysctl')
  t.same(c.HostConfig.Mounts.at(-1), { Type: 'bind', Source: '/opt/skills', Target: '/mnt/skills', ReadOnly: true })
  t.equal(c.HostConfig.NetworkMode, 'none')
  t.same(c.Env.sort(), ['CHAT_ID=x', 'SUBAGENT_CLI=claude'])
})

t.test('config drift: settings fixed at creation are compared, user-derived env is not', async t => {
  const desired = buildSandboxSpec(settings, 'chat-1', undefined, new Date())
  const existing = {
    imageId: 'sha256:a',
    env: [...desired.env, 'PATH=/usr/bin', 'GIT_AUTHOR_NAME=Someone'],
    storage: storageAsSeen(desired.storage),
    network: 'cu-sandboxes',
    memory: 2147483648,
    cpus: 1.5,
    pids: 512,
    tmpfs: {},
    diskQuota: 0
  }
  t.equal(configDrift(existing, desired, 'sha256:a', MANAGED), null)
  t.equal(configDrift(existing, desired, null, MANAGED), null, 'unknown current image is not a drift')
  t.equal(configDrift(existing, desired, 'sha256:b', MANAGED), 'image changed')
  t.equal(configDrift({ ...existing, pids: 100 }, desired, null, MANAGED), 'pids limit changed')
  t.equal(configDrift({ ...existing, memory: 1 }, desired, null, MANAGED), 'memory limit changed')
  t.equal(configDrift({ ...existing, cpus: 1 }, desired, null, MANAGED), 'cpu limit changed')
  t.equal(configDrift({ ...existing, network: 'bridge' }, desired, null, MANAGED), 'network changed')
  t.equal(configDrift({ ...existing, storage: { ...existing.storage, home: 'cu-home-other' } }, desired, null, MANAGED), 'storage changed (home volume changed)')
  t.equal(configDrift({ ...existing, env: existing.env.filter(e => !e.startsWith('CHAT_ID=')) }, desired, null, MANAGED), 'environment changed (CHAT_ID)')
  // A container created while provider credentials were in its environment is recreated at its next start.
  t.equal(configDrift({ ...existing, env: [...existing.env, 'ANTHROPIC_AUTH_TOKEN=tok'] }, desired, null, MANAGED), 'environment changed (ANTHROPIC_AUTH_TOKEN)')
  t.equal(configDrift({ ...existing, env: [...existing.env, 'OPENAI_API_KEY=x'] }, desired, null, MANAGED), 'environment changed (OPENAI_API_KEY)')
  t.equal(configDrift({ ...existing, env: [...existing.env, 'VISION_API_KEY=v'] }, desired, null, MANAGED), 'environment changed (VISION_API_KEY)')
  // A contributor's value that changed (another SUBAGENT_CLI) recreates; a name no contributor manages does not.
  t.equal(configDrift({ ...existing, env: existing.env.map(e => e.startsWith('SUBAGENT_CLI=') ? 'SUBAGENT_CLI=codex' : e) }, desired, null, MANAGED), 'environment changed (SUBAGENT_CLI)')
  t.equal(configDrift({ ...existing, env: [...existing.env, 'HTTP_PROXY=http://old:3128'] }, desired, null, MANAGED), null, 'egress not loaded: its names are not compared')
  t.equal(configDrift({ ...existing, env: [...existing.env, 'HTTP_PROXY=http://old:3128'] }, desired, null, new Set([...MANAGED, 'HTTP_PROXY'])), 'environment changed (HTTP_PROXY)')
})

t.test('storage on a host directory tree: mapped to mounts and read back into the neutral form', async t => {
  const roots = { data: '/srv/cubicle', skills: '/opt/skills' }
  const key = chatKey('chat-1')
  const spec = buildSandboxSpec(settings, 'chat-1', undefined, new Date(), [{ source: '/cache/abc', target: '/mnt/skills/user/notes' }])
  const mounts = hostMounts(spec.storage, roots)
  t.same(mounts.map(m => [m.type, m.source, m.target, m.readOnly]), [
    ['volume', `cu-home-${key}`, '/home/assistant', false],
    ['bind', `/srv/cubicle/chats/${key}/uploads`, '/mnt/user-data/uploads', true],
    ['bind', `/srv/cubicle/chats/${key}/outputs`, '/mnt/user-data/outputs', false],
    ['bind', '/opt/skills', '/mnt/skills', true],
    ['bind', '/cache/abc', '/mnt/skills/user/notes', true]
  ])
  const seen = storageOfMounts(mounts, roots)
  t.same(seen, storageAsSeen(spec.storage), 'read back exactly')
  t.equal(configDrift({ ...DETAILS, env: spec.env, storage: seen }, spec, null, MANAGED), null)
  const drift = (m: typeof mounts, r = roots): string | null => configDrift({ ...DETAILS, env: spec.env, storage: storageOfMounts(m, r) }, spec, null, MANAGED)
  t.equal(drift(mounts, { ...roots, data: '/elsewhere' }), 'storage changed (data areas changed)', 'another DATA_DIR_HOST recreates')
  t.equal(drift(mounts, { ...roots, skills: '/new/skills' }), 'storage changed (skills changed)', 'another SKILLS_DIR_HOST recreates')
  t.equal(drift(mounts.map(m => m.target === '/mnt/user-data/uploads' ? { ...m, readOnly: false } : m)), 'storage changed (data areas changed)', 'writable uploads recreate')
  t.equal(drift(mounts.filter(m => m.target !== '/mnt/skills/user/notes')), 'storage changed (extra mounts changed)')
  t.equal(drift([...mounts, { type: 'bind', source: '/etc', target: '/mnt/etc', readOnly: false }]), 'storage changed (extra mounts changed)', 'an unknown mount shows')
  t.equal(drift(hostMounts({ ...spec.storage, data: { slot: 'a'.repeat(32) } }, roots)), 'storage changed (data areas changed)', 'a pool slot\'s areas are not the chat\'s')
  const noSkills = hostMounts(spec.storage, { ...roots, skills: '' })
  t.equal(storageOfMounts(noSkills, { ...roots, skills: '' }).skills, null, 'an engine without skills cannot tell')
  t.equal(drift(mounts, { ...roots, skills: '' }), 'storage changed (extra mounts changed)', 'skills mounted before SKILLS_DIR_HOST was unset recreate')
  t.throws(() => hostMounts({ ...spec.storage, data: { chat: '../../etc' } }, roots), TypeError, 'an owner that is not a key never becomes a path')
})

t.test('DOCKER_HOST forms', async t => {
  t.same(parseDockerHost('unix:///var/run/docker.sock'), { docker: { socketPath: '/var/run/docker.sock' } })
  t.same(parseDockerHost(''), { docker: { socketPath: '/var/run/docker.sock' } })
  t.same(parseDockerHost('/run/user/1000/docker.sock'), { docker: { socketPath: '/run/user/1000/docker.sock' } })
  t.same(parseDockerHost('tcp://10.0.0.5:2375'), { docker: { protocol: 'http', host: '10.0.0.5', port: 2375 } })
  t.same(parseDockerHost('https://docker.internal'), { docker: { protocol: 'https', host: 'docker.internal', port: 2376 } })
  t.match(parseDockerHost('ssh://me@host'), { docker: { protocol: 'ssh', host: 'host', username: 'me', port: 22 } })
})

t.test('options schema: defaults and validation', async t => {
  const o = parseOptions(SandboxOptions, {}, 'sandbox')
  t.equal(o.prefix, 'cu')
  t.equal(o.memLimit, 2147483648)
  t.equal(o.pidsLimit, 512)
  t.equal(o.createTimeoutS, 60)
  t.equal(o.reaperIntervalMs, 30000)
  t.equal(o.purgeIntervalMs, 3600000)
  t.same(o.sandboxEnv, {})
  t.throws(() => parseOptions(SandboxOptions, { prefix: 'Bad_Prefix' }, 'sandbox'), { code: 'CORE_INVALID_PLUGIN_OPTIONS' })
  t.throws(() => parseOptions(SandboxOptions, { pidsLimit: 2 }, 'sandbox'), { code: 'CORE_INVALID_PLUGIN_OPTIONS' })
})
