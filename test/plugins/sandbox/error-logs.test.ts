/*
 * Sandbox log lines carry the error itself under `err` (pino's serializer: type, message with its
 * causes, stack and the engine's fields), not only its message, and nothing that was not in the error.
 */
import t from 'tap'
import pino from 'pino'
import { parseOptions } from '../../../core/config.js'
import type { SandboxEngine } from '../../../plugins/sandbox/engine-types.js'
import { DockerError } from '../../../plugins/sandbox-docker/docker-error.js'
import { systemClock } from '../../../plugins/sandbox/clock.js'
import { createBase, mapError, type CoreBase } from '../../../plugins/sandbox/context.js'
import { SandboxOptions } from '../../../plugins/sandbox/schemas.js'
import { createChatStorage } from '../../../plugins/chat-storage/service.js'

function registry (lines: Array<Record<string, unknown>>): CoreBase {
  const opts = parseOptions(SandboxOptions, { prefix: 'cu', dataDir: '/nonexistent' }, 'sandbox')
  const log = pino({ level: 'debug' }, { write: (line: string) => { lines.push(JSON.parse(line) as Record<string, unknown>) } })
  return createBase({ ...opts, storage: createChatStorage({ dataDir: '/nonexistent' }) }, {} as SandboxEngine, log, systemClock)
}

t.test('an engine failure is logged as an error object with its cause and fields', async t => {
  const lines: Array<Record<string, unknown>> = []
  const reg = registry(lines)
  const cause = Object.assign(new Error('socket said no'), { code: 'EPROTO' })
  const mapped = mapError(reg, new DockerError('create failed', 500, false, cause))
  t.match(mapped, { code: 'SANDBOX_FAILED', message: /see the server log/ })
  const line = lines.find(l => l.msg === 'engine request failed')
  t.match(line?.err, {
    type: 'DockerError',
    message: 'create failed: socket said no',
    stack: /DockerError: create failed[\s\S]*caused by: Error: socket said no/,
    statusCode: 500,
    unavailable: false
  })
})

t.test('a busy engine is logged at warn with the error object', async t => {
  const lines: Array<Record<string, unknown>> = []
  const reg = registry(lines)
  t.match(mapError(reg, new DockerError('timed out', undefined, false, undefined, true)), { code: 'SANDBOX_ENGINE_BUSY' })
  const line = lines.find(l => l.level === 40)
  t.match(line?.err, { type: 'DockerError', message: 'timed out', busy: true, stack: /DockerError: timed out/ })
})
