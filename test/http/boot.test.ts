import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))

// Each case boots its own server process and mostly waits on it: four at a time instead of fourteen in a
// row (docs/testing.md#the-unit-tiers-time).
t.jobs = 4

/**
 * Starts core/server.ts; resolves with exit code and output once it exits, or kills it when stdout matches
 * `until` (or after `ms`: generous, since four boots share the machine with other files; seen at load 35:
 * a boot that had not logged a line after 60 s).
 */
async function boot (env: Record<string, string>, until?: RegExp, ms = 180_000): Promise<{ code: number | null, stderr: string, stdout: string }> {
  return await new Promise(resolve => {
    const child = spawn(process.execPath, ['--import=tsx', 'core/server.ts'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', DATA_DIR: mkdtempSync(join(tmpdir(), 'cu-boot-')), DOCKER_HOST: 'unix:///nonexistent.sock', PORT: '0', HOST: '127.0.0.1', ...env }
    })
    let stderr = ''
    let stdout = ''
    child.stderr.on('data', c => { stderr += String(c) })
    child.stdout.on('data', c => {
      stdout += String(c)
      if (until?.test(stdout) === true) child.kill('SIGTERM')
    })
    const timer = setTimeout(() => child.kill('SIGTERM'), ms)
    child.on('close', code => { clearTimeout(timer); resolve({ code, stderr, stdout }) })
  })
}

const bad: Array<[string, string, RegExp]> = [
  ['SINGLE_USER_MODE', 'maybe', /FATAL.*SINGLE_USER_MODE/],
  ['SUBAGENT_CLI', 'gemini', /FATAL.*SUBAGENT_CLI='gemini'.*claude.*codex.*opencode/],
  ['PORT', 'eighty', /FATAL.*PORT/],
  ['ENABLE_NETWORK', 'perhaps', /FATAL.*ENABLE_NETWORK.*boolean/],
  ['CONTAINER_MEM_LIMIT', '2 gigs', /FATAL.*CONTAINER_MEM_LIMIT.*size/],
  ['PUBLIC_BASE_URL', 'not a url', /FATAL.*PUBLIC_BASE_URL/],
  // weak keys and a blanket TRUST_PROXY stop the boot, saying what to do instead
  ['MCP_API_KEY', 'weak-key-hunter2', /FATAL.*MCP_API_KEY.*16 characters; at least 32.*openssl rand -hex 32.*node -e/],
  ['LINK_SIGNING_KEY', 'weak-link-key', /FATAL.*LINK_SIGNING_KEY.*at least 32.*openssl rand -hex 32/],
  ['TRUST_PROXY', 'true', /FATAL.*TRUST_PROXY.*would trust any X-Forwarded-For/],
  ['REQUEST_TIMEOUT', 'long', /FATAL.*REQUEST_TIMEOUT/]
]
for (const [name, value, pattern] of bad) {
  t.test(`boot fails with a FATAL line naming ${name} when it is '${value}'`, async t => {
    const { code, stderr } = await boot({ [name]: value })
    t.equal(code, 1)
    t.match(stderr, pattern)
    if (name.endsWith('_KEY')) t.notMatch(stderr, value, 'the secret is not printed')
  })
}

t.test('boot warns about an empty MCP_API_KEY and the default PUBLIC_BASE_URL, logs the runtime, then listens', async t => {
  const { stdout } = await boot({}, /Server listening/)
  t.match(stdout, /PUBLIC_BASE_URL is still the hardcoded default/)
  t.match(stdout, /http:\/\/computer-use-server:8081/)
  t.match(stdout, /MCP_API_KEY is empty/)
  t.match(stdout, /\[MCP\] Sub-agent runtime: claude/)
  t.match(stdout, /Server listening/)
})

// open mode listens on loopback unless HOST is set, and says so
t.test('open mode without HOST listens on 127.0.0.1 and says how to listen on all interfaces', async t => {
  const { stdout } = await boot({ HOST: '' }, /Server listening/)
  t.match(stdout, /open mode: listening on 127\.0\.0\.1 only/)
  t.match(stdout, /set HOST=0\.0\.0\.0/)
  t.match(stdout, /Server listening at http:\/\/127\.0\.0\.1:\d+/)
  t.notMatch(stdout, /Server listening at http:\/\/(?!127\.0\.0\.1)/, 'no other interface')
})

t.test('an explicit HOST in open mode is honoured without the loopback note', async t => {
  const { stdout } = await boot({ HOST: '127.0.0.1' }, /Server listening/)
  t.notMatch(stdout, /open mode: listening on 127\.0\.0\.1 only/)
})

// OAuth gives each person their own computer; SINGLE_USER_MODE=true would put them all in `default`.
t.test('OAUTH_ENABLED=true with SINGLE_USER_MODE=true stops the boot, naming both settings', async t => {
  const { code, stderr } = await boot({ OAUTH_ENABLED: 'true', SINGLE_USER_MODE: 'true', MCP_API_KEY: 'boot-test-key-0123456789abcdef-0123456789', PUBLIC_BASE_URL: 'http://127.0.0.1:8081' })
  t.equal(code, 1)
  t.match(stderr, /FATAL.*SINGLE_USER_MODE.*OAUTH_ENABLED=true/)
})
