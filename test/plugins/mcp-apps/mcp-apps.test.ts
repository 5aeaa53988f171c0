/*
 * MCP Apps (docs/features.md#views-in-the-chat-mcp-apps) over real HTTP with the official SDK clients:
 * a client that declares the `io.modelcontextprotocol/ui` extension (2025-era and 2026-07-28) gets the
 * ui:// views, show_computer and the view reference on bash_tool; one that does not sees exactly what a
 * server without the plugin shows.
 */
import t from 'tap'
import { connect, textOf } from '../../fixtures/mcp-probe.js'
import { listen, TEST_API_KEY } from '../../helper.js'
import { entries, pluginNames } from '../../../fastify.config.js'
import { appsClient, VIEW_MIME as MIME } from '../../fixtures/apps-host.js'

const PUBLIC = 'http://cubicle.test:8081'
const ENV = { MCP_API_KEY: TEST_API_KEY, DOCKER_HOST: 'unix:///nonexistent.sock', PUBLIC_BASE_URL: PUBLIC }
const HEADERS = { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'apps-chat' }

t.test('a client without the Apps extension sees the same tools, resources and results as a server without the plugin', async t => {
  const withPlugin = await listen(t, ENV)
  const without = await listen(t, ENV, config => entries(config, pluginNames.filter(name => name !== 'mcp-apps')))
  const a = await connect(t, withPlugin.url, HEADERS)
  const b = await connect(t, without.url, HEADERS)
  const listA = await a.listTools()
  t.same(listA, await b.listTools(), 'tools/list is identical')
  t.same(listA.tools.map(tool => tool.name), ['bash_tool', 'view', 'create_file', 'str_replace', 'sub_agent'], 'the five tools')
  t.notOk(JSON.stringify(listA).includes('ui://'), 'no view reference')
  t.same(await a.listResources(), await b.listResources(), 'resources/list is identical')
  await t.rejects(a.readResource({ uri: 'ui://cubicle/browser' }), /not found/i, 'no ui:// resource')
  const call = await a.callTool({ name: 'show_computer', arguments: {} }).catch((err: Error) => err)
  t.match(String(call), /Unknown tool: show_computer/, 'no show_computer')
})

for (const revision of [undefined, '2026-07-28']) {
  t.test(`a client with the Apps extension (${revision ?? '2025-era'}) gets the views`, async t => {
    const { url } = await listen(t, ENV)
    const client = await appsClient(t, url, HEADERS, revision)
    const { tools } = await client.listTools()
    t.same(tools.map(tool => tool.name), ['bash_tool', 'view', 'create_file', 'str_replace', 'sub_agent', 'show_computer'])
    t.same(tools.find(tool => tool.name === 'bash_tool')?._meta, { ui: { resourceUri: 'ui://cubicle/files' } }, 'bash_tool opens on the files view')
    t.same(tools.find(tool => tool.name === 'show_computer')?._meta, { ui: { resourceUri: 'ui://cubicle/browser' } })

    const { resources } = await client.listResources()
    t.same(resources.filter(r => r.uri.startsWith('ui://')).map(r => [r.uri, r.mimeType]),
      [['ui://cubicle/browser', MIME], ['ui://cubicle/terminal', MIME], ['ui://cubicle/files', MIME]])
    for (const view of ['browser', 'terminal', 'files']) {
      const { contents } = await client.readResource({ uri: `ui://cubicle/${view}` })
      const [content] = contents as Array<{ uri: string, mimeType: string, text: string, _meta: unknown }>
      t.equal(content?.mimeType, MIME)
      t.same(content?._meta, { ui: { csp: { connectDomains: [PUBLIC, 'ws://cubicle.test:8081'], resourceDomains: [PUBLIC], frameDomains: [PUBLIC] }, prefersBorder: true } }, `${view}: only our origin`)
      const html = content?.text ?? ''
      t.match(html, new RegExp(`^<!doctype html>\\n<html lang="en" data-view="${view}">`), `${view}: the view it opens on`)
      t.notOk(html.includes('apps-chat'), `${view}: no chat id in the cacheable resource`)
      t.notOk(/v1\.[cf]\./.test(html), `${view}: no token`)
      t.notOk(/<script[^>]+src=/.test(html), `${view}: self-contained (no script loaded from elsewhere)`)
      t.equal(html.match(/<\/script>/g)?.length, 2, `${view}: the config block and the one inline module`)
    }

    const shown = await client.callTool({ name: 'show_computer', arguments: { view: 'terminal' } })
    t.match(textOf(shown), /The terminal view of this chat's computer is shown in the chat\. The same views in a browser tab: http:\/\/cubicle\.test:8081\/preview\/apps-chat\?t=v1\.c\./)
    const config = (shown._meta as Record<string, Record<string, unknown>>)['cubicle/view']
    t.match(config, { chatId: 'apps-chat', view: 'terminal', base: `${PUBLIC}/`, scope: 'full', token: /^v1\.c\./, egress: null, apps: null })
    const files = await client.callTool({ name: 'show_computer', arguments: { view: 'files' } })
    t.match((files._meta as Record<string, Record<string, unknown>>)['cubicle/view'], { view: 'files', scope: 'files', token: /^v1\.f\./ }, 'the files view gets a files token only')
    const bad = await client.callTool({ name: 'show_computer', arguments: { view: 'desktop' } })
    t.equal(bad.isError, true)
    t.match(textOf(bad), /invalid arguments: view/)
  })
}

t.test('2026-07-28 on the wire: tools/list of a client without the extension is unchanged (shared-cacheable); with it, private', async t => {
  const withPlugin = await listen(t, ENV)
  const without = await listen(t, ENV, config => entries(config, pluginNames.filter(name => name !== 'mcp-apps')))
  const list = async (url: string, capabilities: Record<string, unknown>): Promise<Record<string, unknown>> => {
    const res = await fetch(new URL('/mcp', url), {
      method: 'POST',
      headers: { ...HEADERS, 'content-type': 'application/json', accept: 'application/json', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': capabilities, 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '0' } } } })
    })
    const { result } = await res.json() as { result: Record<string, unknown> }
    return result
  }
  const plain = await list(withPlugin.url, {})
  t.same(plain, await list(without.url, {}), 'the same answer as a server without the plugin')
  t.match(plain, { ttlMs: 60000, cacheScope: 'public' })
  const apps = await list(withPlugin.url, { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: [MIME] } } })
  t.match(apps, { ttlMs: 0, cacheScope: 'private' }, 'the Apps list is the client\'s own')
  t.ok((apps.tools as Array<{ name: string }>).some(tool => tool.name === 'show_computer'))
})
