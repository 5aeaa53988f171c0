import t, { type Test } from 'tap'
import { execFile } from 'node:child_process'
import { cp, mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { startServer } from '../fixtures/server-process.js'
import { EXTENSION_SCENARIOS, REVISION_2025, REVISION_2026, type Revision } from '../fixtures/conformance-scenarios.js'
import { locateSuite, suiteRequired, type Check } from '../fixtures/conformance-suite.js'
import { tempDir } from '../fixtures/temp-dir.js'

// The official MCP conformance suite (@modelcontextprotocol/conformance, pinned with the Node >= 22 it
// needs in test/conformance/package.json) against the real server in open mode, PUBLIC_BASE_URL
// unset (the setup in which a review found dns-rebinding-protection failing and server-sse-polling
// warning), once per protocol revision the server speaks: 2025-11-25 (initialize, session ids, SSE
// priming) and 2026-07-28 (stateless, server/discover, header validation, cache hints), then the
// skills extension's scenarios, which the suite runs only when named.

const run = promisify(execFile)

/** The server scenarios the suite runs for a revision, scored or not (client scenarios left out). */
function serverScenarios (listed: string): string[] {
  const scored = listed.split(/^Client scenarios/m)[0] ?? ''
  const unscored = listed.split(/^Run and reported/m)[1] ?? ''
  return [...[...scored.matchAll(/^\s+- (\S+)\s*$/gm)].map(m => m[1] ?? ''), ...[...unscored.matchAll(/^\s+- (\S+) \[server\]/gm)].map(m => m[1] ?? '')]
}

const suite = locateSuite()
const required = suiteRequired()

const bad = (c: Check): boolean => c.status !== 'SUCCESS' && c.status !== 'INFO' && c.status !== 'SKIPPED'

async function checkRevision (t: Test, suite: { node: string, cli: string }, url: string, revision: Revision): Promise<Map<string, Check[]>> {
  const listed = (await run(suite.node, [suite.cli, 'list', '--server', '--requirements', revision.requirements], { timeout: 60000 })).stdout
  const scenarios = serverScenarios(listed)
  t.ok(scenarios.length > 10, `the suite lists the server scenarios of ${revision.requirements}`)
  t.same(scenarios.filter(s => !revision.applicable.includes(s) && revision.notApplicable[s] === undefined), [], 'every server scenario of the suite is classified')

  const out = await tempDir(t, 'cu-conformance')
  // Exits 1 because the scenarios that do not apply fail; the per-scenario results decide below.
  await run(suite.node, [suite.cli, 'server', '--url', `${url}/mcp`, '--requirements', revision.requirements, '-o', out], { timeout: 400000 }).catch(() => undefined)
  const results = new Map<string, Check[]>()
  for (const dir of await readdir(out)) {
    const scenario = dir.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, '')
    results.set(scenario, JSON.parse(await readFile(join(out, dir, 'checks.json'), 'utf8')) as Check[])
  }

  for (const scenario of revision.applicable) {
    const checks = results.get(scenario) ?? []
    t.ok(checks.some(c => c.status === 'SUCCESS'), `${scenario}: ran and passed at least one check`)
    const exempt = (c: Check): boolean => { const e = revision.exempt[c.id]; return e !== undefined && e.failure.test(c.errorMessage ?? '') }
    t.same(checks.filter(c => bad(c) && !exempt(c)).map(c => `${c.id} ${c.status}: ${c.errorMessage ?? ''}`), [], `${scenario}: no warning, no failure`)
  }
  for (const [scenario, { why, failure }] of Object.entries(revision.notApplicable)) {
    // A skipped check counts here: a scenario that only skips has not shown that it applies.
    const messages = (results.get(scenario) ?? []).filter(c => c.status !== 'SUCCESS' && c.status !== 'INFO').map(c => c.errorMessage ?? c.status)
    t.ok(messages.length > 0 && messages.every(m => failure.test(m)), `${scenario} does not apply (${why}): ${messages.join('; ').slice(0, 200)}`)
  }
  return results
}

/** The built-in skills plus `examples/directory-tour` (first by URI, with two subfolders), for the skills scenarios. */
async function skillsDir (t: Test): Promise<string> {
  const dir = await tempDir(t, 'cu-conformance-skills')
  await cp(new URL('../../sandbox-image/skills', import.meta.url), dir, { recursive: true })
  const tour = join(dir, 'examples', 'directory-tour')
  await mkdir(join(tour, 'references'), { recursive: true })
  await mkdir(join(tour, 'scripts'))
  await writeFile(join(tour, 'SKILL.md'), '---\nname: directory-tour\ndescription: |\n  A skill with subfolders,\n  for the directory checks.\nmetadata:\n  owner: tests\n---\n\n# Tour\n\nRead references/notes.md.\n')
  await writeFile(join(tour, 'references', 'notes.md'), '# Notes\n')
  await writeFile(join(tour, 'scripts', 'tour.sh'), '#!/bin/sh\necho tour\n')
  return dir
}

async function checkExtensionScenarios (t: Test, suite: { node: string, cli: string }, url: string): Promise<void> {
  const listed = (await run(suite.node, [suite.cli, 'list', '--server'], { timeout: 60000 })).stdout
  for (const scenario of EXTENSION_SCENARIOS) {
    t.match(listed, new RegExp(`- ${scenario} \\[extension\\]`), `the suite still has ${scenario}`)
    const out = await tempDir(t, 'cu-conformance')
    await run(suite.node, [suite.cli, 'server', '--url', `${url}/mcp`, '--scenario', scenario, '-o', out], { timeout: 120000 }).catch(() => undefined)
    const checks: Check[] = []
    for (const dir of await readdir(out)) checks.push(...JSON.parse(await readFile(join(out, dir, 'checks.json'), 'utf8')) as Check[])
    t.ok(checks.length >= 6, `${scenario}: ran its checks (${checks.length})`)
    t.same(checks.filter(c => c.status !== 'SUCCESS').map(c => `${c.id} ${c.status}: ${c.errorMessage ?? ''}`), [], `${scenario}: every check passed`)
  }
}

const status = (results: Map<string, Check[]>, scenario: string, id: string): string | undefined => results.get(scenario)?.find(c => c.id === id)?.status

t.test('the official MCP conformance suite passes every applicable server scenario of both protocol revisions', { skip: typeof suite === 'string' && !required ? suite : false }, async t => {
  if (typeof suite === 'string') {
    t.fail(`the MCP conformance suite is required here (REQUIRE_DOCKER=1 or CI): ${suite}`)
    return
  }
  const { url } = await startServer(t, { SKILLS_DIR: await skillsDir(t), SKILLS_INCLUDE_EXAMPLES: 'true' })

  await t.test('2025-11-25', async t => {
    const results = await checkRevision(t, suite, url, REVISION_2025)
    t.equal(status(results, 'dns-rebinding-protection', 'localhost-host-valid-accepted'), 'SUCCESS', 'own loopback Host/Origin accepted')
    t.equal(status(results, 'dns-rebinding-protection', 'localhost-host-rebinding-rejected'), 'SUCCESS', 'foreign Host/Origin refused')
    t.equal(status(results, 'server-sse-polling', 'server-sse-priming-event'), 'SUCCESS', 'priming event first on the POST stream')
    t.equal(status(results, 'server-sse-polling', 'server-sse-retry-field'), 'SUCCESS', 'retry field')
  })

  await t.test('2026-07-28', async t => {
    const results = await checkRevision(t, suite, url, REVISION_2026)
    t.equal(status(results, 'server-stateless', 'sep-2575-server-implements-discover'), 'SUCCESS', 'server/discover answers')
    t.equal(status(results, 'server-stateless', 'sep-2575-http-server-header-mismatch-400'), 'SUCCESS', 'a header that contradicts the body is 400 -32020')
    t.equal(status(results, 'server-stateless', 'sep-2575-server-sends-subscription-ack'), 'SUCCESS', 'subscriptions/listen acknowledges first')
    t.equal(status(results, 'dns-rebinding-protection', 'localhost-host-rebinding-rejected'), 'SUCCESS', 'foreign Host/Origin refused')
    t.equal(status(results, 'caching', 'sep-2549-cache-scope-valid'), 'SUCCESS', 'cache hints on the cacheable results')
  })

  await t.test('the MCP skills extension (SEP-2640)', async t => {
    await checkExtensionScenarios(t, suite, url)
  })
})
