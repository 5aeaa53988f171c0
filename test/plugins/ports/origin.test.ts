/*
 * Apps on their own origins (plugins/ports/origin.ts): APPS_DOMAIN's check, the origin of an app, and the
 * rewrite before routing: a known key, a key named by the chat cookie (after a restart), forged or
 * malformed hosts. The whole flow on Docker and Chromium is test/integration/apps-origin.test.ts.
 */
import t from 'tap'
import type { IncomingMessage } from 'node:http'
import { chatKey } from '../../../core/chat-id.js'
import { createAppOrigins, parseAppsDomain, UNKNOWN_APP_PATH } from '../../../plugins/ports/origin.js'

const req = (host: string | undefined, url: string, cookie?: string): IncomingMessage =>
  ({ url, headers: { ...(host === undefined ? {} : { host }), ...(cookie === undefined ? {} : { cookie }) } }) as unknown as IncomingMessage

t.test('APPS_DOMAIN is a DNS name other than the server\'s host', async t => {
  t.equal(parseAppsDomain('', 'https://cubicle.example.com'), undefined, 'empty: the path form')
  t.equal(parseAppsDomain(' Apps.Example.COM. ', 'https://cubicle.example.com'), 'apps.example.com')
  for (const bad of ['*.apps.example.com', 'apps', 'https://apps.example.com', 'a_b.example.com', '-x.example.com', 'x'.repeat(64) + '.com']) {
    t.throws(() => parseAppsDomain(bad, 'https://cubicle.example.com'), /APPS_DOMAIN must be a DNS name/, bad)
  }
  t.throws(() => parseAppsDomain('cubicle.example.com', 'https://cubicle.example.com:8443'), /must not be PUBLIC_BASE_URL's host/)
})

t.test('an app host is rewritten to its app route; the chat comes from links handed out or the checked cookie', async t => {
  const o = createAppOrigins('apps.example.com', 'https://cubicle.example.com:8443/base')
  const key = chatKey('chat-1')
  t.equal(o.originOf('chat-1', 3000), `https://${key}-3000.apps.example.com:8443`)
  const host = `${key}-3000.apps.example.com:8443`
  t.equal(o.rewrite(req(host, '/x?y=1')), UNKNOWN_APP_PATH, 'a key not known yet, no cookie: the unknown-origin page')
  o.remember('chat-1')
  const known = req(host.toUpperCase(), '/x?y=1')
  t.equal(o.rewrite(known), '/apps/chat-1/3000/x?y=1', 'known (host case does not matter)')
  t.same(o.hostOf(known), { origin: `https://${host}`, host, chatId: 'chat-1', port: 3000 })
  t.equal(o.hostOf(req(host, '/')), undefined, 'not rewritten: not an app host')

  const fresh = createAppOrigins('apps.example.com', 'https://cubicle.example.com:8443')
  t.equal(fresh.rewrite(req(host, '/', 'a=1; cubicle_app_chat=chat-1')), '/apps/chat-1/3000/', 'after a restart: the cookie names the chat, checked against the key')
  const other = `${chatKey('chat-2')}-3000.apps.example.com`
  t.equal(createAppOrigins('apps.example.com', 'https://c.example.com').rewrite(req(other, '/', 'cubicle_app_chat=chat-1')), UNKNOWN_APP_PATH, 'a cookie naming another chat than the key\'s')
  t.equal(createAppOrigins('apps.example.com', 'https://c.example.com').rewrite(req(other, '/', 'cubicle_app_chat=CHAT-2')), UNKNOWN_APP_PATH, 'a cookie that is not a normalised chat id')

  for (const h of ['cubicle.example.com', 'apps.example.com', `${key}-3000.apps.example.com.evil.com`, `${key}-3000.xapps.example.com`, undefined, 'x'.repeat(400)]) {
    t.equal(o.rewrite(req(h, '/')), undefined, `not an app host: ${String(h).slice(0, 60)}`)
  }
  for (const h of [`${key}-80.apps.example.com`, `${key}-70000.apps.example.com`, `${key}-03000.apps.example.com`, `${key.slice(1)}-3000.apps.example.com`, `a.${key}-3000.apps.example.com`, `${key.toUpperCase()}x-3000.apps.example.com`]) {
    t.equal(o.rewrite(req(h, '/')), UNKNOWN_APP_PATH, `an app host that names no app: ${h}`)
  }
})
