/*
 * (e) outputs listing of a 20k-file chat: cached listing ÷ uncached walk, and 100 parallel cold
 * listings ÷ one uncached walk (single flight: ≈ 1 plus transfer, would be ≈ 100 without), RSS.
 */
import { closeSync, mkdirSync, openSync } from 'node:fs'
import { join } from 'node:path'
import { chatPaths } from '../core/chat-paths.js'
import { BASE, median, ms, now, rssMiB, type Server } from './common.js'

export const LISTING_FILES = 20_000

/** Creates the (e) chat's outputs before the server starts: empty files in one flat directory. */
export function listingFixture (dataDir: string): void {
  const dir = chatPaths(dataDir, 'bench-e').outputs
  mkdirSync(dir, { recursive: true })
  for (let i = 0; i < LISTING_FILES; i++) closeSync(openSync(join(dir, `f${i}.txt`), 'w'))
}

/** (e) the listing's single flight and short cache against a walk that is forced to run. */
export async function benchListing (server: Server): Promise<string> {
  const list = async (): Promise<number> => {
    const t0 = now()
    const res = await fetch(`${BASE}/api/outputs/bench-e`)
    if (!res.ok) throw new Error(`listing answered ${res.status}`)
    await res.arrayBuffer()
    return now() - t0
  }
  const walks: number[] = []
  for (let i = 0; i < 5; i++) {
    const ms = await list()
    walks.push(ms)
    // Past the cache lifetime (2 s, or twice the walk), so the next listing walks again.
    await new Promise(resolve => setTimeout(resolve, Math.max(2100, 2 * ms + 100)))
  }
  const cached: number[] = []
  await list()
  for (let i = 0; i < 100; i++) cached.push(await list())
  await new Promise(resolve => setTimeout(resolve, Math.max(2100, 2 * median(walks) + 100)))
  const rssBefore = rssMiB(server.child.pid ?? 0)
  let peak = rssBefore
  const sampler = setInterval(() => { peak = Math.max(peak, rssMiB(server.child.pid ?? 0)) }, 20)
  const t0 = now()
  await Promise.all(Array.from({ length: 100 }, list))
  const parallel = now() - t0
  clearInterval(sampler)
  const walk = median(walks)
  return `(e) ${LISTING_FILES} files: cached listing ${ms(median(cached))} ÷ uncached walk ${ms(walk)} = ${(median(cached) / walk).toFixed(3)}; ` +
    `100 parallel cold listings ${ms(parallel)} ÷ one walk = ${(parallel / walk).toFixed(2)} (single flight; ≈ 100 without); server RSS +${(peak - rssBefore).toFixed(0)} MiB`
}
