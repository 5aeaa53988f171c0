/*
 * Isolation and limits against a real engine (docs/contract.md#sandbox-layout, docs/contract.md#sandbox-configuration, docs/contract.md#isolation, docs/contract.md#credential-allowlist): two chats cannot see each
 * other's files or processes nor reach each other over the network; limits are visible inside; the
 * environment carries only the active CLI's allowlist. The fork bomb the pids limit contains loads
 * the machine: test/serial/sandbox-fork-bomb.test.ts.
 */
import t from 'tap'
import { loadConfig } from '../../core/config.js'
import { subAgentEnvContributor, subAgentEnvFromConfig } from '../../plugins/sub-agent/env.js'
import { buildSandboxApp, cleanupPrefix, dockerOrSkip } from './docker.js'

const PREFIX = 'tiso'
const { skip } = await dockerOrSkip()

t.test('sandbox isolation (real Docker)', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)

  t.test('two chats: files, processes and network are separate', async t => {
    const { app } = await buildSandboxApp(t, PREFIX)
    const sb = app.sandbox
    await Promise.all([sb.ensure('iso-a'), sb.ensure('iso-b')])
    const sh = async (chat: string, script: string, timeoutMs = 20_000): Promise<{ out: string, code: number | null }> => {
      const r = await sb.exec(chat, ['bash', '-c', script], { timeoutMs })
      return { out: r.stdout.toString() + r.stderr.toString(), code: r.exitCode }
    }
    await sh('iso-a', 'echo secret-a > ~/a.txt; echo out-a > /mnt/user-data/outputs/a.txt')
    t.equal((await sh('iso-b', 'ls ~/a.txt /mnt/user-data/outputs/a.txt 2>&1; true')).out.match(/No such file/g)?.length, 2, 'b sees none of a\'s files')
    await sh('iso-b', 'nohup sleep 4242 >/dev/null 2>&1 &')
    t.equal((await sh('iso-b', 'pgrep -f "sleep 4242"')).code, 0)
    t.equal((await sh('iso-a', 'pgrep -f "sleep 4242"')).code, 1, 'a does not see b\'s processes')
    t.equal((await sh('iso-a', 'ps -e --no-headers | wc -l')).out.trim() !== '', true)

    // b serves on its address; b reaches it, a cannot (ICC disabled on the sandbox network).
    await sh('iso-b', 'nohup python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &')
    const ipB = (await sh('iso-b', 'hostname -i')).out.trim().split(/\s+/)[0] ?? ''
    const ipA = (await sh('iso-a', 'hostname -i')).out.trim().split(/\s+/)[0] ?? ''
    t.match(ipB, /^\d+\.\d+\.\d+\.\d+$/)
    t.not(ipA, ipB)
    const self = await sh('iso-b', `for i in $(seq 1 50); do curl -s -o /dev/null -w '%{http_code}' --max-time 2 http://${ipB}:8000/ && exit 0; sleep 0.1; done; exit 1`)
    // Each attempt before the server listens prints 000 (the agent starts commands faster than the server binds).
    t.equal(self.out.slice(-3), '200', 'b reaches its own server (positive control)')
    const cross = await sh('iso-a', `curl -s -o /dev/null -w '%{http_code}' --max-time 3 http://${ipB}:8000/`)
    t.not(cross.code, 0, `a cannot reach b at ${ipB} (curl exit ${String(cross.code)})`)
    t.not(cross.out, '200')
  })

  t.test('limits are visible inside: memory, pids, no new privileges, no capabilities', async t => {
    const { app } = await buildSandboxApp(t, PREFIX, { memLimit: 256 * 1024 * 1024, pidsLimit: 100, cpuLimit: 0.5 })
    await app.sandbox.ensure('iso-limits')
    const read = async (script: string): Promise<string> => (await app.sandbox.exec('iso-limits', ['sh', '-c', script])).stdout.toString().trim()
    // cgroup v2 (memory.max) or v1 (memory/memory.limit_in_bytes)
    const mem = await read('cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes')
    t.equal(mem, String(256 * 1024 * 1024), 'memory limit')
    const swap = await read('cat /sys/fs/cgroup/memory.swap.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes 2>/dev/null || echo n/a')
    t.ok(swap === '0' || swap === String(256 * 1024 * 1024) || swap === 'n/a', `no extra swap (${swap})`)
    t.equal(await read('cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max'), '100', 'pids limit')
    const status = await read('grep -E "^(NoNewPrivs|CapEff|CapPrm|CapBnd):" /proc/self/status')
    t.match(status, /NoNewPrivs:\s+1/)
    t.match(status, /CapEff:\s+0000000000000000/)
    t.match(status, /CapBnd:\s+0000000000000000/, 'bounding set empty (CapDrop ALL)')
    const rootStatus = (await app.sandbox.exec('iso-limits', ['grep', 'CapEff', '/proc/self/status'], { user: 'root' })).stdout.toString()
    t.match(rootStatus, /CapEff:\s+0000000000000000/, 'even root has no capability')
    t.equal(await read('id -u; ps -o user= -p 1'), '1000\nassistant', 'everything runs as assistant')
    t.equal(await read('cat /proc/1/cmdline | tr "\\0" " "'), '/sbin/docker-init -- /usr/local/bin/cubicle-entrypoint sleep infinity', 'init + image entrypoint once + keep-alive')
    t.equal(await read('df -k /dev/shm | tail -1 | awk \'{print $2}\''), String(256 * 1024), 'shm 256 MiB')
  })

  t.test('environment: only the active CLI\'s allowlist, never server secrets, and that allowlist only in sub_agent runs: the container environment has no provider credential', async t => {
    const host: Record<string, string> = {
      ANTHROPIC_AUTH_TOKEN: 'a-tok',
      ANTHROPIC_BASE_URL: 'https://gw.example',
      ANTHROPIC_MODEL: 'm',
      OPENAI_API_KEY: 'oa',
      OPENAI_BASE_URL: 'https://oa',
      CODEX_CONFIG_EXTRA: 'cx',
      OPENROUTER_API_KEY: 'or',
      ANTHROPIC_API_KEY: 'ak',
      OPENCODE_CONFIG_EXTRA: 'ox',
      CODEX_MODEL: 'cm',
      MCP_API_KEY: 'server-secret-0123456789abcdef0123456789',
      LINK_SIGNING_KEY: 'link-secret-0123456789abcdef0123456789ab',
      MCP_TOKENS_API_KEY: 'tokens-secret',
      VISION_API_KEY: 'vk'
    }
    const never = ['ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_BASE_URL', 'ANTHROPIC_MODEL', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'CODEX_CONFIG_EXTRA', 'CODEX_MODEL',
      'OPENROUTER_API_KEY', 'ANTHROPIC_API_KEY', 'OPENCODE_CONFIG', 'OPENCODE_CONFIG_EXTRA', 'VISION_API_KEY', 'VISION_MODEL',
      'MCP_API_KEY', 'LINK_SIGNING_KEY', 'MCP_TOKENS_API_KEY']
    for (const cli of ['claude', 'codex', 'opencode'] as const) {
      const config = loadConfig({ ...host, SUBAGENT_CLI: cli })
      // Even a sandboxEnv that wrongly carried the run's credentials or a server secret would not pass them through.
      const { app } = await buildSandboxApp(t, PREFIX, { sandboxEnv: { ...subAgentEnvFromConfig(config), MCP_API_KEY: 'server-secret' } })
      // What the sub-agent plugin registers: SUBAGENT_CLI in, provider credentials withheld.
      app.sandbox.addEnvContributor?.(subAgentEnvContributor(cli))
      const chat = `iso-env-${cli}`
      await app.sandbox.ensure(chat)
      const env = (await app.sandbox.exec(chat, ['env'])).stdout.toString()
      const names = new Set(env.split('\n').map(l => l.slice(0, l.indexOf('='))))
      t.ok(names.has('SUBAGENT_CLI') && env.includes(`SUBAGENT_CLI=${cli}\n`), `${cli}: SUBAGENT_CLI`)
      for (const n of never) t.notOk(names.has(n), `${cli}: no ${n}`)
      for (const secret of ['a-tok', 'server-secret', 'link-secret', 'tokens-secret']) t.notOk(env.includes(secret), `${cli}: no ${secret}`)
      await app.close()
    }
  })

  t.test('ENABLE_NETWORK=false: network mode none', async t => {
    const { app } = await buildSandboxApp(t, PREFIX, { enableNetwork: false })
    await app.sandbox.ensure('iso-offline')
    const r = await app.sandbox.exec('iso-offline', ['sh', '-c', 'ls /sys/class/net'])
    t.equal(r.stdout.toString().trim(), 'lo', 'only loopback')
  })
})
