/*
 * Icons (docs/contract.md#icons) as a client sees them: serverInfo.icons and each built-in tool's icons
 * through the official SDK client over real HTTP, then every icon URL fetched from our own origin with
 * its content type, cache headers and revalidation.
 */
import { readFile } from 'node:fs/promises'
import t from 'tap'
import { connect } from '../fixtures/mcp-probe.js'
import { listen, TEST_API_KEY } from '../helper.js'

const PUBLIC = 'http://cubicle.test'
const BUILT_IN = ['bash_tool', 'view', 'create_file', 'str_replace', 'sub_agent']
const publicFile = (name: string): URL => new URL(`../../plugins/icons/public/${name}`, import.meta.url)

t.test('serverInfo and every built-in tool carry PNG and SVG icons served from our origin', async t => {
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, DOCKER_HOST: 'unix:///nonexistent.sock', PUBLIC_BASE_URL: PUBLIC })
  const client = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'icons' })
  const iconsOf = (name: string): unknown[] => [
    { src: `${PUBLIC}/icons/${name}.png`, mimeType: 'image/png', sizes: ['128x128'] },
    { src: `${PUBLIC}/icons/${name}.svg`, mimeType: 'image/svg+xml', sizes: ['any'] }
  ]
  t.same(client.getServerVersion()?.icons, iconsOf('cubicle'), 'serverInfo.icons')
  const { tools } = await client.listTools()
  t.same(tools.map(tool => tool.name).sort(), [...BUILT_IN].sort())
  for (const tool of tools) t.same(tool.icons, iconsOf(tool.name), `${tool.name}: icons`)

  const srcs = [...(client.getServerVersion()?.icons ?? []), ...tools.flatMap(tool => tool.icons ?? [])]
  t.equal(srcs.length, 12)
  for (const icon of srcs) {
    const path = new URL(icon.src).pathname
    const res = await fetch(`${url}${path}`)
    t.equal(res.status, 200, path)
    t.equal(res.headers.get('content-type')?.split(';')[0], icon.mimeType, `${path}: content type`)
    t.match(res.headers.get('cache-control'), /max-age=86400/, `${path}: cacheable for a day`)
    t.equal(res.headers.get('x-content-type-options'), 'nosniff')
    t.equal(res.headers.get('access-control-allow-origin'), '*')
    t.same(Buffer.from(await res.arrayBuffer()), await readFile(publicFile(path.slice('/icons/'.length))), `${path}: the file`)
    const etag = res.headers.get('etag')
    t.ok(etag, `${path}: ETag`)
    // As a browser revalidates (fetch alone would add Cache-Control: no-cache to a conditional request).
    const again = await fetch(`${url}${path}`, { headers: { 'if-none-match': etag ?? '', 'cache-control': 'max-age=0' } })
    t.equal(again.status, 304, `${path}: revalidation answers 304`)
  }
  const svg = await fetch(`${url}/icons/cubicle.svg`)
  t.match(svg.headers.get('content-security-policy'), /default-src 'none'/, 'an SVG opened on its own runs nothing')
})

t.test('only the listed icons are served; no credential is needed for them', async t => {
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, DOCKER_HOST: 'unix:///nonexistent.sock', PUBLIC_BASE_URL: PUBLIC })
  t.equal((await fetch(`${url}/icons/view.png`)).status, 200, 'public: a client shows icons before any sign-in')
  for (const path of ['/icons/', '/icons/nope.png', '/icons/view.gif', '/icons/..%2Fpackage.json', '/icons/%2e%2e/index.ts', '/icons/.hidden']) {
    const res = await fetch(`${url}${path}`)
    t.equal(res.status, 404, path)
  }
})

t.test('a tool an integrator adds without an icon file gets none; one that brings its own keeps it', async t => {
  const { default: fp } = await import('fastify-plugin')
  const { default: Type } = await import('typebox')
  const { entry } = await import('../../core/app.js')
  const { entries } = await import('../../fastify.config.js')
  const extra = fp(async fastify => {
    for (const [name, icons] of [['plain', undefined], ['own', [{ src: 'https://icons.example/own.png', mimeType: 'image/png' }]], ['view', undefined]] as const) {
      fastify.mcp.addTool({ name, description: name, inputSchema: Type.Object({}), handler: async () => ({ content: [] }) })
      if (icons !== undefined) fastify.mcp.transformToolList(list => list.map(tool => tool.name === name ? { ...tool, icons: [...icons] } : tool))
    }
  }, { name: 'extra-tools', dependencies: ['mcp-transport'] })
  const { url } = await listen(t, { MCP_API_KEY: TEST_API_KEY, PUBLIC_BASE_URL: PUBLIC }, config => [...entries(config, ['mcp-transport']), entry(extra, {}), ...entries(config, ['icons'])])
  const client = await connect(t, url, { Authorization: `Bearer ${TEST_API_KEY}`, 'X-Chat-Id': 'icons' })
  const byName = Object.fromEntries((await client.listTools()).tools.map(tool => [tool.name, tool.icons]))
  t.equal(byName.plain, undefined)
  t.same(byName.own, [{ src: 'https://icons.example/own.png', mimeType: 'image/png' }])
  t.equal(byName.view?.[0]?.src, `${PUBLIC}/icons/view.png`)
})
