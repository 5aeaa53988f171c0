/** One dependency's state as /ready reports it: `fields` are merged into the body, `ok` decides the status. */
export interface ReadinessResult { ok: boolean, fields: Record<string, string> }
export type ReadinessCheck = () => Promise<ReadinessResult>

export interface ReadinessService {
  /** Register while plugins load. Each check gets `timeoutMs`; a timeout or throw counts as not ready. */
  addCheck (name: string, check: ReadinessCheck): void
  /** Runs every check concurrently; the combined result is cached for `cacheMs`. */
  run (): Promise<{ ok: boolean, body: Record<string, string> }>
}

export function createReadinessService (opts: { timeoutMs: number, cacheMs: number }): ReadinessService {
  const checks = new Map<string, ReadinessCheck>()
  let cached: { at: number, value: Promise<{ ok: boolean, body: Record<string, string> }> } | undefined
  async function runOne (name: string, check: ReadinessCheck): Promise<ReadinessResult> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<ReadinessResult>(resolve => {
      timer = setTimeout(() => resolve({ ok: false, fields: { [name]: 'timeout' } }), opts.timeoutMs)
    })
    try {
      return await Promise.race([check(), timeout])
    } catch {
      return { ok: false, fields: { [name]: 'error' } }
    } finally { clearTimeout(timer) }
  }
  async function runAll (): Promise<{ ok: boolean, body: Record<string, string> }> {
    const results = await Promise.all([...checks].map(async ([name, check]) => await runOne(name, check)))
    const ok = results.every(r => r.ok)
    return { ok, body: Object.assign({ status: ok ? 'ready' : 'not_ready' }, ...results.map(r => r.fields)) }
  }
  return {
    addCheck (name, check) { checks.set(name, check) },
    async run () {
      if (cached === undefined || Date.now() - cached.at > opts.cacheMs) cached = { at: Date.now(), value: runAll() }
      return await cached.value
    }
  }
}
