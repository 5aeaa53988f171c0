import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { listen } from '../helper.js'
import { connect } from '../fixtures/mcp-probe.js'
import { memorySandboxes, TIERS, tiersManifest, uploadFile, type TierName } from '../fixtures/tiers-app.js'

/** What each tier's consumer can observe, measured from the outside. */
async function observe (t: Test, without?: TierName): Promise<Record<TierName, boolean>> {
  const dataDir = await mkdtemp(join(tmpdir(), 'tiers-toggle-'))
  t.teardown(async () => { await rm(dataDir, { recursive: true, force: true }) })
  const log = memorySandboxes()
  const { url } = await listen(t, { DATA_DIR: dataDir }, tiersManifest({ sandboxes: log, ...(without !== undefined && { without }) }))
  const chat = await connect(t, url, { 'X-Chat-Id': 'chat-a' })
  const invalid = await connect(t, url, { 'X-Chat-Id': 'not/valid' })
  const { tools } = await chat.listTools()
  await chat.callTool({ name: 'bash_tool', arguments: { description: 'touch the sandbox' } })
  t.equal(await uploadFile(url, 'chat-a', 'u.txt', 'u'), 200, 'uploads work regardless')
  const prompt = await fetch(`${url}/system-prompt?chat_id=chat-a`)
  await prompt.arrayBuffer()
  return {
    'tier-tool-descriptions': (tools.find(x => x.name === 'bash_tool')?.description ?? '').includes('README.md'),
    'tier-readme': (await log.file('chat-a', '/home/assistant/README.md') ?? '').includes('This is the contents of /home/assistant/README.md'),
    'tier-static-instructions': (invalid.getInstructions() ?? '').includes('resources/list'),
    'tier-dynamic-instructions': (chat.getInstructions() ?? '').includes('This is the contents of'),
    'tier-resources': (await chat.listResources()).resources.some(r => r.uri === 'file://uploads/chat-a/u.txt'),
    'tier-http': prompt.status === 200
  }
}

const allOn = Object.fromEntries(TIERS.map(name => [name, true])) as Record<TierName, boolean>

t.test('with all six tiers every channel carries the prompt', async t => {
  t.same(await observe(t), allOn)
})

for (const tier of TIERS) {
  t.test(`removing ${tier} silences only that channel`, async t => {
    t.same(await observe(t, tier), { ...allOn, [tier]: false })
  })
}
