import type { FastifyBaseLogger } from 'fastify'
import type { EngineFailure, SandboxEngine } from './engine-types.js'

/*
 * Every engine call logged at debug level with its duration, so an operator can tell a slow engine
 * from a slow core: `{ call, target, ms }` on success, plus `err` and the failure's kind on failure.
 * Only the call's target (a sandbox id or name, a volume, a network) is logged, never a spec, an
 * environment, file content or a command line: those may carry a user's credentials. An exec is
 * logged when its process has been set up (`ms`) and again when it ended (`ms` since the set-up began,
 * its exit code).
 */

const round = (ms: number): number => Math.round(ms * 10) / 10

function failure (err: unknown): Record<string, unknown> {
  const e = err as Partial<EngineFailure>
  return { err, reason: e?.reason, unavailable: e?.unavailable, busy: e?.busy }
}

export function loggedEngine (engine: SandboxEngine, log: FastifyBaseLogger, now: () => number = () => performance.now()): SandboxEngine {
  const wrapped: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(engine)) {
    if (typeof value !== 'function' || name === 'close' || name === 'exec' || name === 'watchSandboxes' || name === 'serveEgress') { wrapped[name] = value; continue }
    wrapped[name] = async (...args: unknown[]) => {
      const t0 = now()
      const target = typeof args[0] === 'string' ? args[0] : undefined
      try {
        const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(engine, args)
        log.debug({ call: name, target, ms: round(now() - t0) }, 'engine call')
        return result
      } catch (err) {
        log.debug({ call: name, target, ms: round(now() - t0), ...failure(err) }, 'engine call failed')
        throw err
      }
    }
  }
  wrapped.close = () => { engine.close() }
  const exec: SandboxEngine['exec'] = async (id, spec) => {
    const t0 = now()
    try {
      const proc = await engine.exec(id, spec)
      log.debug({ call: 'exec', target: id, ms: round(now() - t0) }, 'engine call')
      void proc.exit.then(e => { log.debug({ call: 'exec exit', target: id, ms: round(now() - t0), code: e.code, notStarted: e.notStarted }, 'engine process ended') })
      return proc
    } catch (err) {
      log.debug({ call: 'exec', target: id, ms: round(now() - t0), ...failure(err) }, 'engine call failed')
      throw err
    }
  }
  wrapped.exec = exec
  return wrapped as unknown as SandboxEngine
}
