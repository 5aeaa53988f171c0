/*
 * (k) before and after a change, in one run (docs/performance.md): two servers up at once, one built from
 * another checkout (a git worktree of the commit before the change, with a sandbox image built from it) and
 * one from this checkout, each with its own chat running the web app of test/fixtures/web-app.ts. Rounds
 * alternate between them (which side goes first flips every round), so that load drift on a shared machine
 * hits both alike: per round and side, 30 keep-alive GETs of `/apps/<chat>/3000/small` with Node's http
 * client, then 30 of `/small` from inside the sandbox (bench/apps.ts insideScript). Each side also reports its
 * server's CPU time (user + system, /proc) over its proxied GETs: per request, summed over the rounds.
 *
 *   npx tsx bench/ab-apps.ts <base checkout> <base image> [image]     AB_ROUNDS=10, AB_PER_ROUND=30; BENCH_NO_BUILD=1 keeps
 *                                                                     both checkouts' dist/ as they are
 *
 * The frame (two servers, one per checkout, as child processes) is bench/ab-sides.ts.
 */
import { Agent, get } from 'node:http'
import { loadavg } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { median, runSide, runSides } from './ab-sides.js'

const PER_ROUND = 30

/** One side: the server of `tree` with its chat and app. */
async function side (tree: string): Promise<void> {
  const { startApp } = await import(join(tree, 'test/fixtures/web-app.ts')) as typeof import('../test/fixtures/web-app.js')
  const { insideScript } = await import(join(tree, 'bench/apps.ts')) as typeof import('./apps.js')
  const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 })
  const nodeGet = async (url: string): Promise<number> => await new Promise((resolve, reject) => {
    const t0 = performance.now()
    get(url, { agent: keepAlive }, res => {
      res.resume()
      res.once('end', () => { if (res.statusCode === 200) resolve(performance.now() - t0); else reject(new Error(`${url}: HTTP ${res.statusCode ?? 0}`)) })
    }).once('error', reject)
  })
  await runSide(tree, async common => {
    const c = await common.client('bench-k')
    await common.bash(c, startApp(3000))
    const url = `${common.BASE}/apps/bench-k/3000/small`
    for (let i = 0; i < 100; i++) await nodeGet(url)
    return {
      measure: async m => {
        const n = m.n ?? PER_ROUND
        const xs: number[] = []
        if (m.op === 'proxied') for (let i = 0; i < n; i++) xs.push(await nodeGet(url))
        else xs.push(...JSON.parse((await common.bash(c, insideScript(n))).trim().split('\n')[0] ?? '[]') as number[])
        return xs
      },
      close: async () => { await c.close() }
    }
  })
}

async function main (): Promise<void> {
  await runSides(fileURLToPath(import.meta.url), process.argv.slice(2), 'npx tsx bench/ab-apps.ts <base checkout> <base image> [image]', async (sides, ask) => {
    const perRound = Number(process.env.AB_PER_ROUND ?? PER_ROUND)
    const load0 = loadavg()[0] ?? 0
    const rounds = Number(process.env.AB_ROUNDS ?? 10)
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? sides : [...sides].reverse()
      for (const s of order) await ask(s, { op: 'proxied', n: perRound })
      for (const s of order) await ask(s, { op: 'inside', n: perRound })
    }
    for (const s of sides) {
      const [proxied, inside] = [s.xs.proxied ?? [], s.xs.inside ?? []]
      console.log(`${s.name}: proxied ${median(proxied).toFixed(3)} ms ÷ inside ${median(inside).toFixed(3)} ms = ${(median(proxied) / median(inside)).toFixed(2)} (${proxied.length} each, median); server CPU ${((s.cpuMs.proxied ?? 0) / proxied.length).toFixed(3)} ms per proxied request`)
    }
    const [before, after] = sides
    console.log(`after ÷ before, proxied: ${(median(after.xs.proxied ?? []) / median(before.xs.proxied ?? [])).toFixed(3)}, server CPU: ${((after.cpuMs.proxied ?? 0) / (before.cpuMs.proxied ?? 1)).toFixed(3)}; load average ${load0.toFixed(1)} → ${(loadavg()[0] ?? 0).toFixed(1)}`)
  })
}

if (process.argv[2] === '--side') side(process.argv[3] ?? '.').catch(err => { console.error(err); process.exit(1) })
else main().catch(err => { console.error(err); process.exitCode = 1 })
