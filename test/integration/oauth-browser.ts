/*
 * The way through the OAuth login page in real Chromium (docs/contract.md#oauth), beside the fetch-based one
 * of test/fixtures/oauth-server.ts.
 */
import type { Browser } from 'playwright-core'
import { TEST_API_KEY } from '../helper.js'
import type { SignIn } from '../fixtures/oauth-server.js'
import { gotoReady, inNewContext } from './chromium.js'

/**
 * Opens `url` in a new Chromium context, signs in on the real login page (access key, optional email), answers
 * the consent page and returns the URL the browser was finally sent to (the client's redirect URI, intercepted:
 * nothing listens there, unless `who.deliver`). A sign-in whose page lost a request to a network change of the
 * Docker host (ERR_NETWORK_CHANGED) is done again from the start in another new context.
 */
export async function signInWithBrowser (browser: Browser, url: URL | string, redirectPrefix: string, who: SignIn): Promise<URL> {
  return await inNewContext(browser, async page => {
    let landed: URL | undefined
    if (who.deliver === true) page.on('request', r => { if (r.url().startsWith(redirectPrefix)) landed = new URL(r.url()) })
    else {
      await page.route(`${redirectPrefix}**`, async route => {
        landed = new URL(route.request().url())
        await route.fulfill({ status: 200, contentType: 'text/plain', body: 'done' })
      })
    }
    await gotoReady(page, String(url), async () => { await page.locator('input[name=key]').waitFor() })
    await page.fill('input[name=key]', who.key ?? TEST_API_KEY)
    if (who.email !== undefined) await page.fill('input[name=email]', who.email)
    await page.click('button[type=submit]')
    await page.click(`button[value=${who.decision ?? 'allow'}]`) // waits for the consent page
    await page.waitForURL(u => u.href.startsWith(redirectPrefix))
    if (landed === undefined) throw new Error('the browser never reached the redirect URI')
    return landed
  })
}
