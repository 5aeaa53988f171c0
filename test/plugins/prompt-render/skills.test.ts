import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import Fastify from 'fastify'
import { buildApp, entry } from '../../../core/app.js'
import { loadConfig } from '../../../core/config.js'
import capabilities from '../../../plugins/capabilities/index.js'
import promptRender from '../../../plugins/prompt-render/index.js'
import { loadSkillsIndex, parseFrontMatter, skillsBlock } from '../../../plugins/prompt-render/skills.js'
import { tempDir } from '../../fixtures/temp-dir.js'

async function skillsTree (t: Test, files: Record<string, string>): Promise<string> {
  const root = await tempDir(t, 'skills')
  for (const [rel, body] of Object.entries(files)) {
    await mkdir(join(root, rel, '..'), { recursive: true })
    await writeFile(join(root, rel), body)
  }
  return root
}

function warnings (): { log: ReturnType<typeof Fastify>['log'], lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = []
  const stream = { write: (s: string) => { lines.push(JSON.parse(s) as Record<string, unknown>) } }
  const log = Fastify({ logger: { level: 'warn', stream } }).log
  return { log, lines }
}

t.test('front matter with CRLF line endings is accepted', async t => {
  t.match(parseFrontMatter('---\r\nname: docx\r\ndescription: Word files\r\n---\r\n# body'), { ok: true, name: 'docx', description: 'Word files' })
})

t.test('block scalars | and > become one-line descriptions', async t => {
  t.match(parseFrontMatter('---\nname: a\ndescription: |\n  line one\n  line two\n---\n'), { ok: true, description: 'line one line two' })
  t.match(parseFrontMatter('---\nname: b\ndescription: >-\n  folded\n  text\nlicense: MIT\n---\n'), { ok: true, description: 'folded text' })
})

t.test('invalid front matter is reported, not thrown', async t => {
  t.match(parseFrontMatter('# no front matter'), { ok: false })
  t.match(parseFrontMatter('---\nname: a\ndescription: x\n'), { ok: false, reason: /closed/ })
  t.match(parseFrontMatter('---\nname: Bad_Name\ndescription: x\n---\n'), { ok: false, reason: /name/ })
  t.match(parseFrontMatter('---\nname: a\n---\n'), { ok: false, reason: /description/ })
  t.match(parseFrontMatter(`---\nname: a\ndescription: ${'x'.repeat(1025)}\n---\n`), { ok: false, reason: /1,024/ })
  t.match(parseFrontMatter('---\nname: [a\ndescription: x\n---\n'), { ok: false, reason: /YAML/ })
})

t.test('the index orders public before examples, alphabetically, and skips invalid skills with a warning', async t => {
  const root = await skillsTree(t, {
    'public/zeta/SKILL.md': '---\nname: zeta\ndescription: Z\n---\n',
    'public/alpha/SKILL.md': '---\nname: alpha\ndescription: A\n---\n',
    'public/broken/SKILL.md': '---\nname: broken\n---\n',
    'public/nofile/README.md': 'x',
    'examples/demo/SKILL.md': '---\r\nname: demo\r\ndescription: >\r\n  D\r\n---\r\n'
  })
  const { log, lines } = warnings()
  const index = await loadSkillsIndex(root, log)
  t.same(index.all.map(s => `${s.category}/${s.name}`), ['public/alpha', 'public/zeta', 'examples/demo'])
  t.same(index.dirs, ['public', 'examples'])
  t.equal(index.all[0]?.location, '/mnt/skills/public/alpha/SKILL.md')
  t.ok(lines.some(l => l.dir === 'broken' && l.level === 40), 'broken skill logged at warn')
})

t.test('the <available_skills> block has the exact layout of docs/contract.md#skills', async t => {
  const block = skillsBlock([
    { name: 'docx', description: 'Word <docs> & "more"', category: 'public', location: '/mnt/skills/public/docx/SKILL.md' },
    { name: 'pdf', description: `  many\n\n  words ${'y'.repeat(400)}`, category: 'public', location: '/mnt/skills/public/pdf/SKILL.md' }
  ])
  const lines = block.split('\n')
  t.same(lines.slice(0, 13), ['<available_skills>', '<skill>', '<name>', 'docx', '</name>', '<description>',
    'Word &lt;docs&gt; &amp; &quot;more&quot;', '</description>', '<location>', '/mnt/skills/public/docx/SKILL.md', '</location>', '</skill>', ''])
  t.equal(lines[13], '<skill>')
  t.equal(lines[18]?.length, 300, 'description cut to 300 chars')
  t.match(lines[18], /^many words y+$/)
  t.same(lines.slice(-3), ['</skill>', '', '</available_skills>'])
  t.equal(skillsBlock([]), '<available_skills>\n</available_skills>')
})

t.test('the bundled skills of the sandbox image are all listed (examples only when enabled; sub-agent only with its tool)', async t => {
  const config = loadConfig({ LOG_LEVEL: 'silent' })
  for (const includeExamples of [false, true]) {
    const a = await buildApp(config, [entry(capabilities, { publicBaseUrl: config.publicBaseUrl }), entry(promptRender, { includeExamples })], { logger: false })
    t.teardown(async () => { await a.close() })
    await a.ready()
    const names = (await a.prompts.skills()).map(s => s.name)
    const expected = ['browser', 'describe-image', 'doc-coauthoring', 'docx', 'file-reading', 'file-sharing', 'frontend-design', 'job', 'pdf', 'pdf-reading', 'pptx', 'skill-creator', 'webapp-testing', 'xlsx', ...(includeExamples ? ['hello-skill'] : [])]
    t.same(names, expected, `includeExamples=${String(includeExamples)}`)
    const text = await a.prompts.render({ chatId: 'c1' })
    t.equal(text.includes('/mnt/skills/examples/hello-skill/SKILL.md'), includeExamples)
  }
})

t.test('SKILLS_DIR replaces the bundled skills and a missing directory stops the boot', async t => {
  const root = await skillsTree(t, { 'public/only-one/SKILL.md': '---\nname: only-one\ndescription: The only skill\n---\n' })
  const config = loadConfig({ LOG_LEVEL: 'silent' })
  const a = await buildApp(config, [entry(capabilities, { publicBaseUrl: config.publicBaseUrl }), entry(promptRender, { skillsDir: root })], { logger: false })
  t.teardown(async () => { await a.close() })
  await a.ready()
  t.same((await a.prompts.skills()).map(s => s.name), ['only-one'])
  t.match(await a.prompts.render({ chatId: 'c1' }), '/mnt/skills/public/only-one/SKILL.md')
  await writeFile(join(root, 'public', 'only-one', 'SKILL.md'), '---\nname: only-one\ndescription: Changed text\n---\n')
  await a.prompts.reloadSkills()
  t.match(await a.prompts.render({ chatId: 'c1' }), 'Changed text', 'reload invalidates cached renders')

  const err = await buildApp(config, [entry(capabilities, { publicBaseUrl: config.publicBaseUrl }), entry(promptRender, { skillsDir: join(root, 'nope') })], { logger: false })
    .catch((e: unknown) => e)
  t.match(err, { code: 'PROMPT_SKILLS_DIR_MISSING' })
})

t.test('many skills are dropped from the end so the render stays under the byte cap', async t => {
  const files: Record<string, string> = {}
  for (let i = 0; i < 150; i++) files[`public/s${String(i).padStart(3, '0')}/SKILL.md`] = `---\nname: s${String(i).padStart(3, '0')}\ndescription: ${'d'.repeat(290)}\n---\n`
  const root = await skillsTree(t, files)
  const config = loadConfig({ LOG_LEVEL: 'silent' })
  const a = await buildApp(config, [entry(capabilities, { publicBaseUrl: config.publicBaseUrl }), entry(promptRender, { skillsDir: root })], { logger: false })
  t.teardown(async () => { await a.close() })
  await a.ready()
  const text = await a.prompts.render({ chatId: 'c1' })
  t.ok(Buffer.byteLength(text) <= 32768, `${Buffer.byteLength(text)} bytes`)
  t.match(text, /\(\d+ more skills are installed/)
  t.match(text, '<name>\ns000\n</name>')
})
