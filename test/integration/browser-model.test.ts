// the model drives the chat's browser from bash_tool with the `browser` CLI of the image.
import t from 'tap'
import type { CallToolResult, ImageContent } from '@modelcontextprotocol/sdk/types.js'
import { dockerOrSkip } from './docker.js'
import { bash, browserApp, mcpClient, SITE } from './browser-app.js'

const gate = await dockerOrSkip()

t.test('the model opens a page served in the sandbox, reads it, clicks, and saves a screenshot that view shows', gate, async t => {
  const { url } = await browserApp(t, { ENABLE_NETWORK: 'false' })
  const c = await mcpClient(t, url, 'browser-model')

  const opened = await bash(c, SITE)
  t.match(opened, /Page URL: http:\/\/127\.0\.0\.1:8000\/index\.html/, 'the browser started on first use and opened the page without network access')

  const snapshot = await bash(c, 'browser snapshot')
  t.match(snapshot, /heading "Hello from the sandbox"/)
  const ref = /button "Go" \[ref=(e\d+)\]/.exec(snapshot)?.[1]
  t.ok(ref, 'the snapshot gives the button a reference')
  t.match(await bash(c, 'browser eval "document.body.innerText"'), /Hello from the sandbox[\s\S]*waiting/, 'reads the text')

  await bash(c, `browser click ${ref ?? 'e0'}`)
  t.match(await bash(c, "browser eval \"document.getElementById('out').textContent\""), /Clicked: /, 'the click changed the page')

  const shot = await bash(c, 'cd /mnt/user-data/outputs && browser screenshot --filename=page.png && ls -l page.png')
  t.match(shot, /page\.png/, 'a relative file name lands in the caller\'s directory')
  const view = await c.callTool({ name: 'view', arguments: { path: '/mnt/user-data/outputs/page.png', description: 'look' } }) as CallToolResult
  const image = view.content.find(b => b.type === 'image') as ImageContent | undefined
  t.equal(image?.mimeType, 'image/jpeg', 'view returns the screenshot as an image')

  t.test('the browser is shared between commands, restarts when it died and cannot be closed by the model', async t => {
    t.match(await bash(c, 'browser tab-list'), /Agent page/, 'a second command sees the same tab')
    await bash(c, 'kill $(cat ~/.cache/cubicle-browser/chromium.pid); sleep 1')
    t.match(await bash(c, 'browser open file:///home/assistant/site/index.html'), /Page URL: file:\/\/\/home\/assistant\/site\/index\.html/, 'restarted on the next command; file:// works')
    t.match(await bash(c, 'browser close; echo "rc=$?"'), /managed by this wrapper[\s\S]*rc=1/, 'close is refused: the browser is shared')
  })
})
