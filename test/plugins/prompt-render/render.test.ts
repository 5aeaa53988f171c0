import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, entry } from '../../../core/app.js'
import { loadConfig } from '../../../core/config.js'
import capabilities from '../../../plugins/capabilities/index.js'
import promptRender from '../../../plugins/prompt-render/index.js'
import type { PromptRenderOptions } from '../../../plugins/prompt-render/schemas.js'
import { entries } from '../../../fastify.config.js'
import fp from 'fastify-plugin'
import Type from 'typebox'
import type {} from '../../../plugins/mcp-transport/types.js'
import { tempDir } from '../../fixtures/temp-dir.js'

/** Registers a `sub_agent` tool, as a sub-agent plugin would. */
const fakeSubAgent = fp(async fastify => {
  fastify.mcp.addTool({ name: 'sub_agent', description: 'x', order: 50, inputSchema: Type.Object({}), handler: async () => ({ content: [] }) })
}, { name: 'fake-sub-agent', dependencies: ['mcp-transport'] })

/** Decorates `ports`, as the ports plugin (app preview URLs) does. */
const fakePorts = fp(async fastify => { fastify.decorate('ports', { apps: async () => [], appUrl: () => '', connections: () => 0 }) }, { name: 'fake-ports' })

async function app (t: Test, env: Record<string, string> = {}, opts: PromptRenderOptions = {}, withSubAgent = false, withPorts = false): Promise<FastifyInstance> {
  const config = loadConfig({ LOG_LEVEL: 'silent', PUBLIC_BASE_URL: 'http://cubicle.test/', ...env })
  const a = await buildApp(config, [
    ...(withSubAgent ? [...entries(config, ['mcp-transport']), entry(fakeSubAgent, {})] : []),
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: config.LINK_SIGNING_KEY, tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(promptRender, { singleUserMode: config.singleUserMode, ...opts }),
    ...(withPorts ? [entry(fakePorts, {})] : [])
  ], { logger: false })
  t.teardown(async () => { await a.close() })
  await a.ready()
  return a
}

t.test('a chat render carries every topic of docs/contract.md#rendered-prompt-content and the chat\'s own links', async t => {
  const a = await app(t, {}, { commandTimeoutSeconds: 77, subagentCli: 'codex' }, true)
  const text = await a.prompts.render({ chatId: 'chat-a', email: 'ann@example.com' })
  const [first] = text.split('\n')
  t.match(first, /^<!--.*This is the contents of \/home\/assistant\/README\.md.*-->$/)
  t.match(text, 'through one tool: `sub_agent`', 'the tools named are those tools/list shows')
  t.match(text, '77 seconds')
  t.match(text, /background/)
  for (const dir of ['/mnt/user-data/uploads', '/home/assistant', '/mnt/user-data/outputs', '/mnt/skills']) t.match(text, dir)
  t.match(text, /read-only/)
  t.match(text, /persists across turns/)
  t.notMatch(text, /reset/i, 'never claims the home directory resets')
  t.match(text, 'Chat id: `chat-a`')
  t.match(text, 'http://cubicle.test/files/chat-a/Q3%20report.pdf')
  t.match(text, 'http://cubicle.test/files/chat-a/archive')
  t.match(text, '![Chart](http://cubicle.test/files/chat-a/chart.png)')
  t.match(text, 'ann@example.com')
  t.match(text, /read that skill's SKILL\.md/)
  t.match(text, '<location>\n/mnt/skills/public/docx/SKILL.md\n</location>')
  t.match(text, 'OpenAI Codex CLI (`codex`)')
  t.match(text, 'resume_session_id')
  t.match(text, '<location>\n/mnt/skills/public/sub-agent/SKILL.md\n</location>', 'the sub-agent skill is listed with its tool (docs/contract.md#sub-agent-execution)')
  t.ok((await a.prompts.skills()).some(s => s.name === 'sub-agent'))
  t.match(text, /pdfinfo/)
  t.match(text, /exit status 1/i)
  t.notMatch(text, /file_create/)
  t.notMatch(text, /\{file_base_url\}|\{archive_url\}|\{chat_id\}/)
  t.ok(Buffer.byteLength(text) < 32 * 1024, `render is ${Buffer.byteLength(text)} bytes`)
})

t.test('the prompt names only the tools that exist: no sub_agent section without a sub_agent tool', async t => {
  const a = await app(t)
  const text = await a.prompts.render({ chatId: 'chat-a' })
  t.match(text, 'through four tools: `bash_tool` (run shell commands), `view` (read files, list directories, look at images), `create_file` (write a whole file) and `str_replace` (edit a file).')
  t.notMatch(text, 'sub_agent')
  t.notMatch(text, 'resume_session_id')
  // a skill that teaches a missing tool is not listed either
  t.notMatch(text, '/mnt/skills/public/sub-agent/')
  t.notOk((await a.prompts.skills()).some(s => s.name === 'sub-agent'))
})

t.test('long-running work: the job command with its skill, the nohup advice with an image that has no job skill', async t => {
  const withJob = await (await app(t)).prompts.render({ chatId: 'chat-a' })
  t.match(withJob, 'Run servers and longer jobs in the background with the `job` command: `job start --name web -- npm run dev`')
  t.match(withJob, '/mnt/skills/public/job/SKILL.md')
  t.notMatch(withJob, /nohup/)
  const root = await tempDir(t, 'render-skills')
  await mkdir(join(root, 'public', 'docx'), { recursive: true })
  await writeFile(join(root, 'public', 'docx', 'SKILL.md'), '---\nname: docx\ndescription: Word files.\n---\n# docx\n')
  const withoutJob = await (await app(t, {}, { skillsDir: root })).prompts.render({ chatId: 'chat-a' })
  t.match(withoutJob, 'Start longer jobs in the background with output redirected (`nohup cmd > job.log 2>&1 &`)')
  t.notMatch(withoutJob, /job start/)
})

t.test('the prompt explains app preview URLs only when the ports plugin is loaded', async t => {
  const withApps = await (await app(t, { MCP_API_KEY: 'k'.repeat(40) }, {}, false, true)).prompts.render({ chatId: 'chat-a' })
  t.match(withApps, '## Web apps')
  t.match(withApps, 'http://cubicle.test/apps/chat-a/<port>/', 'the chat\'s apps base, without a token')
  t.match(withApps, '--base /apps/chat-a/<port>/')
  t.notMatch(withApps.slice(withApps.indexOf('## Web apps')), /\?t=v1\.c/, 'never a control token')
  t.notMatch(await (await app(t)).prompts.render({ chatId: 'chat-a' }), 'Web apps')
})

t.test('without a chat the legacy template keeps its three placeholders', async t => {
  const a = await app(t)
  const text = await a.prompts.render({})
  t.match(text, '{file_base_url}')
  t.match(text, '{archive_url}')
  t.match(text, '{chat_id}')
  t.notMatch(text, 'cubicle.test')
})

t.test('protected mode links carry a day-stable files token and the render is byte-stable', async t => {
  const a = await app(t, { MCP_API_KEY: 'k'.repeat(32) })
  const one = await a.prompts.render({ chatId: 'chat-a' })
  a.prompts.invalidate()
  const two = await a.prompts.render({ chatId: 'chat-a' })
  t.equal(one, two, 'a fresh render is identical')
  t.match(one, /http:\/\/cubicle\.test\/files\/chat-a\/~v1\.f\.\d+\.[A-Za-z0-9_-]{22}\/archive/)
  t.notMatch(one, /~v1\.c\./, 'no control token in the prompt')
})

t.test('SINGLE_USER_MODE=true renders every chat as default', async t => {
  const a = await app(t, { SINGLE_USER_MODE: 'true' })
  const text = await a.prompts.render({ chatId: 'chat-b' })
  t.match(text, 'Chat id: `default`')
  t.match(text, 'http://cubicle.test/files/default')
  t.notMatch(text, 'chat-b')
  t.equal(await a.prompts.render({ chatId: 'other' }), text)
})

t.test('an invalid chat id is refused before rendering', async t => {
  const a = await app(t)
  const err = await a.prompts.render({ chatId: '../x' }).catch((e: unknown) => e)
  t.match(err, { code: 'CORE_INVALID_CHAT_ID', statusCode: 400 })
})

t.test('an invalid email renders as if none was given', async t => {
  const a = await app(t)
  t.equal(await a.prompts.render({ chatId: 'c1', email: 'not an email' }), await a.prompts.render({ chatId: 'c1' }))
})

t.test('renders differ by chat and by email', async t => {
  const a = await app(t)
  const a1 = await a.prompts.render({ chatId: 'c1' })
  t.not(a1, await a.prompts.render({ chatId: 'c2' }))
  t.not(a1, await a.prompts.render({ chatId: 'c1', email: 'x@example.com' }))
})
