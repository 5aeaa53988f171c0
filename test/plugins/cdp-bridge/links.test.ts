import t from 'tap'
import { entries } from '../../../fastify.config.js'
import type { Entry } from '../../../core/app.js'
import { build, TEST_API_KEY } from '../../helper.js'
import { fakeSandbox } from './fake-sandbox.js'

const KEY = TEST_API_KEY

// the prompt and /system-prompt give the human a way to the Browser view.
t.test('/system-prompt sends X-Browser-URL (preview on its Browser view, control token) when cdp-bridge is loaded', async t => {
  for (const withBridge of [true, false]) {
    const fake = fakeSandbox()
    const app = await build(t, { MCP_API_KEY: KEY, PUBLIC_BASE_URL: 'https://cu.example' }, config => {
      const list: Entry[] = entries(config, ['capabilities', 'prompt-render', 'tier-http', ...(withBridge ? ['cdp-bridge' as const] : [])])
      return [list[0] as Entry, { register: async a => await a.register(fake.plugin) }, ...list.slice(1)]
    })
    const res = await app.inject({ url: '/system-prompt?chat_id=chat-a', headers: { authorization: `Bearer ${KEY}` } })
    t.equal(res.statusCode, 200)
    const header = res.headers['x-browser-url']
    if (withBridge) t.match(header, /^https:\/\/cu\.example\/preview\/chat-a\?t=v1\.c\.\d+\.[\w-]{22}#browser$/)
    else t.equal(header, undefined, 'no header without the bridge')
    t.match(res.body, /the `browser` command drives a Chromium that the user watches live and can take over in the Browser tab/)
    t.match(res.body, /<location>\n\/mnt\/skills\/public\/browser\/SKILL\.md\n<\/location>/, 'the browser skill is listed')
  }
})
