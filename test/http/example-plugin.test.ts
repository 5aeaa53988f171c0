import t from 'tap'
import { entry } from '../../core/app.js'
import manifest, { entries, pluginNames } from '../../fastify.config.js'
import helloPlugin from '../../examples/hello-plugin/index.js'
import { listen } from '../helper.js'
import { connect, textOf } from '../fixtures/mcp-probe.js'

t.test('a plugin added to the manifest contributes a tool after the built-ins and a route, with no core change', async t => {
  const { url } = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' }, config => [...manifest(config), entry(helloPlugin, { greeting: 'Hi' })])
  const client = await connect(t, url, { 'X-Chat-Id': 'plug-in' })
  const names = (await client.listTools()).tools.map(x => x.name)
  t.same(names, ['bash_tool', 'view', 'create_file', 'str_replace', 'sub_agent', 'hello_world'])
  t.equal(textOf(await client.callTool({ name: 'hello_world', arguments: { name: 'Ada', times: '2' } })), 'Hi, Ada! (chat plug-in)\nHi, Ada! (chat plug-in)')
  t.same(await (await fetch(`${url}/hello`)).json(), { greeting: 'Hi' })
})

t.test('the default manifest lists exactly the built-in tools in the contract order', async t => {
  const { url } = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' })
  const client = await connect(t, url, { 'X-Chat-Id': 'plain' })
  const tools = (await client.listTools()).tools
  t.same(tools.map(x => x.name), ['bash_tool', 'view', 'create_file', 'str_replace', 'sub_agent'], 'the five tools of docs/contract.md#common-tool-rules')
  t.match(tools.find(x => x.name === 'bash_tool')?.description, /README\.md/)
  t.match(tools.find(x => x.name === 'bash_tool')?.description, /\/home\/assistant/)
  t.match(tools.find(x => x.name === 'view')?.description, /README\.md/)
  for (const tool of tools) t.notOk('outputSchema' in tool, `${tool.name} declares no outputSchema`)
})

// removing the sub-agent line of the manifest leaves the other four tools and a prompt that never mentions sub_agent
t.test('without the sub-agent plugin: four tools, and neither the prompt nor the instructions name sub_agent', async t => {
  const { url, app } = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' }, config => {
    const all = manifest(config)
    const without = entries(config, pluginNames.filter(n => n !== 'sub-agent'))
    t.equal(without.length, all.length - 1, 'exactly one line removed')
    return without
  })
  const client = await connect(t, url, { 'X-Chat-Id': 'no-sub-agent' })
  t.same((await client.listTools()).tools.map(x => x.name), ['bash_tool', 'view', 'create_file', 'str_replace'])
  t.notMatch(client.getInstructions() ?? '', /sub_agent|Sub-agent/)
  const prompt = await app.prompts.render({ chatId: 'no-sub-agent' })
  t.match(prompt, /bash_tool/)
  t.notMatch(prompt, /sub_agent|Sub-agent/)
  const full = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' })
  t.match(await full.app.prompts.render({ chatId: 'with-sub-agent' }), /## Sub-agent/, 'the default manifest has the section')
})

t.test('without Docker the server still answers: /ready says docker unavailable and tools fail clearly', async t => {
  const { url } = await listen(t, { DOCKER_HOST: 'unix:///nonexistent.sock' })
  const ready = await fetch(`${url}/ready`)
  t.equal(ready.status, 503)
  t.match(await ready.json(), { status: 'not_ready', docker: 'unavailable' })
  const client = await connect(t, url, { 'X-Chat-Id': 'no-docker' })
  const result = await client.callTool({ name: 'bash_tool', arguments: { command: 'echo hi', description: 'test' } })
  t.equal(result.isError, true)
  t.match(textOf(result), /^Error: .*(Docker|docker)/)
  const page = await fetch(`${url}/`)
  t.match(await page.text(), /bash_tool/)
})
