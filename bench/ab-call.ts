/*
 * (a) before and after a change, in one run (docs/performance.md; the frame is bench/ab-sides.ts): each
 * server has its own chat. Rounds alternate between the two (which side goes first flips every round), so
 * that load drift on a shared machine hits both alike: per round and side, AB_PER_ROUND warm `echo hi`
 * bash_tool calls, then as many raw dockerode execs in the same container (the goal's divisor), with the
 * server's CPU time over its calls. AB_FIRST=1 measures (b) instead: new chats' first calls, pool empty
 * (SANDBOX_POOL_SIZE=0), AB_PER_ROUND (default 3) per round and side, against raw create + start + exec.
 *
 *   npx tsx bench/ab-call.ts <base checkout> <base image> [image]     AB_ROUNDS=10, AB_PER_ROUND=20; BENCH_NO_BUILD=1 keeps
 *                                                                     both checkouts' dist/ as they are
 */
import { loadavg } from 'node:os'
import { fileURLToPath } from 'node:url'
import { median, runSide, runSides } from './ab-sides.js'

const CHAT = 'bench-ab-call'
const FIRST = process.env.AB_FIRST === '1'

async function side (tree: string): Promise<void> {
  await runSide(tree, async common => {
    const c = await common.client(CHAT)
    await common.bash(c, 'true')
    const info = await common.chatContainer(CHAT)
    if (info === undefined) throw new Error('the chat has no sandbox')
    const container = common.docker.getContainer(info.Id)
    for (let i = 0; i < 20; i++) await common.bash(c, 'echo hi')
    let chats = 0
    /** a new chat's first call (the client connected before the clock starts), or the raw create + start + exec */
    const first = async (op: string): Promise<number> => {
      if (op === 'raw') {
        const t0 = performance.now()
        const box = await common.rawContainer()
        await box.start()
        await common.rawExec(box, ['echo', 'first'])
        const ms = performance.now() - t0
        await box.remove({ force: true })
        return ms
      }
      const fresh = await common.client(`${CHAT}-${chats++}`)
      const t0 = performance.now()
      await common.bash(fresh, 'echo first')
      const ms = performance.now() - t0
      await fresh.close()
      return ms
    }
    return {
      measure: async m => {
        const xs: number[] = []
        for (let i = 0; i < (m.n ?? 20); i++) {
          if (FIRST) { xs.push(await first(m.op)); continue }
          const t0 = performance.now()
          if (m.op === 'calls') await common.bash(c, 'echo hi'); else await common.rawExec(container, ['echo', 'hi'])
          xs.push(performance.now() - t0)
        }
        return xs
      },
      close: async () => { await c.close() }
    }
  }, FIRST ? 0 : undefined)
}

async function main (): Promise<void> {
  await runSides(fileURLToPath(import.meta.url), process.argv.slice(2), 'npx tsx bench/ab-call.ts <base checkout> <base image> [image]', async (sides, ask) => {
    const perRound = Number(process.env.AB_PER_ROUND ?? (FIRST ? 3 : 20))
    const load0 = loadavg()[0] ?? 0
    for (let r = 0; r < Number(process.env.AB_ROUNDS ?? 10); r++) {
      const order = r % 2 === 0 ? sides : [...sides].reverse()
      for (const s of order) await ask(s, { op: 'calls', n: perRound })
      for (const s of order) await ask(s, { op: 'raw', n: perRound })
    }
    const calls = (i: 0 | 1): number[] => sides[i].xs.calls ?? []
    for (const s of sides) {
      const [mcp, raw] = [s.xs.calls ?? [], s.xs.raw ?? []]
      console.log(`${s.name}: ${FIRST ? 'first bash_tool, pool empty' : 'bash_tool echo'} ${median(mcp).toFixed(2)} ms ÷ ${FIRST ? 'raw create+start+exec' : 'raw exec'} ${median(raw).toFixed(2)} ms = ${(median(mcp) / median(raw)).toFixed(3)} (${mcp.length} each, median); server CPU ${((s.cpuMs.calls ?? 0) / mcp.length).toFixed(2)} ms per call`)
    }
    console.log(`after ÷ before, call: ${(median(calls(1)) / median(calls(0))).toFixed(3)}, server CPU: ${((sides[1].cpuMs.calls ?? 0) / (sides[0].cpuMs.calls ?? 1)).toFixed(3)}; load average ${load0.toFixed(1)} → ${(loadavg()[0] ?? 0).toFixed(1)}`)
  })
}

if (process.argv[2] === '--side') side(process.argv[3] ?? '.').catch(err => { console.error(err); process.exit(1) })
else main().catch(err => { console.error(err); process.exitCode = 1 })
