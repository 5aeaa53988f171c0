import Fastify from 'fastify'
import t from 'tap'
import { errorHandler } from '../../core/error-handler.js'
import { defineError, definitionOf, INTERNAL_ERROR, isNamedFailure, isOneOf, wireCodeOf } from '../../core/errors.js'
import { errorResult, MAX_TOOL_ERROR_CHARS } from '../../core/tool-result.js'

/* The identity of an error (core/errors.ts) and the one shape of a tool error (core/tool-result.ts). */

const TEST_TOO_LARGE = defineError('TEST_TOO_LARGE', 'too_large_here', 'more than %d bytes', 413)
const TEST_ENGINE_GONE = defineError('TEST_ENGINE_GONE', 'engine_gone', 'the engine is gone', 503)
const TEST_BROKEN = defineError('TEST_BROKEN', INTERNAL_ERROR, 'broken: %s', 500)

t.test('a definition carries its code, wire code, status and message template', async t => {
  const err = new TEST_TOO_LARGE(10, { cause: new Error('inner') })
  t.match(err, { code: 'TEST_TOO_LARGE', statusCode: 413, message: 'more than 10 bytes', wireCode: 'too_large_here' })
  t.ok(err instanceof TEST_TOO_LARGE)
  t.equal((err.cause as Error).message, 'inner')
  const { code, wire, statusCode, message } = TEST_TOO_LARGE
  t.same({ code, wire, statusCode, message }, { code: 'TEST_TOO_LARGE', wire: 'too_large_here', statusCode: 413, message: 'more than %d bytes' })
  t.notOk(Object.keys(err).includes('wireCode'), 'the wire code is the definition\'s, not copied onto each error (nor into logs)')
  t.equal(definitionOf(err), TEST_TOO_LARGE)
})

t.test('defineError refuses a bad wire code, internal_error below 500 and a code defined twice', async t => {
  t.throws(() => defineError('TEST_BAD_WIRE', 'Bad-Wire', 'x', 400), TypeError)
  t.throws(() => defineError('TEST_BAD_WIRE', 'bad__wire', 'x', 400), TypeError)
  t.throws(() => defineError('TEST_INTERNAL_4XX', INTERNAL_ERROR, 'x', 404), /only a 5xx/)
  t.throws(() => defineError('TEST_TOO_LARGE', 'other', 'x', 400), /defined twice/)
})

t.test('wireCodeOf: by the definition, never by a prefix of the code', async t => {
  t.equal(wireCodeOf(new TEST_TOO_LARGE(1), 413), 'too_large_here')
  t.equal(wireCodeOf(new TEST_BROKEN('x'), 500), INTERNAL_ERROR)
  // An error that crossed a plugin boundary by code (as fakes throw them) counts only with the definition's status.
  t.equal(wireCodeOf(Object.assign(new Error('x'), { code: 'TEST_ENGINE_GONE', statusCode: 503 }), 503), 'engine_gone')
  t.equal(wireCodeOf(Object.assign(new Error('x'), { code: 'TEST_ENGINE_GONE' }), 500), INTERNAL_ERROR)
  // Unknown codes, whatever they look like, fall back by status.
  t.equal(wireCodeOf(Object.assign(new Error('x'), { code: 'TEST_UNKNOWN_THING', statusCode: 400 }), 400), 'bad_request')
  t.equal(wireCodeOf(Object.assign(new Error('x'), { code: 'TEST_UNKNOWN_THING', statusCode: 404 }), 404), 'not_found')
  t.equal(wireCodeOf(new Error('x'), 502), INTERNAL_ERROR)
  // A wire code pasted onto an error is not an identity.
  t.equal(wireCodeOf(Object.assign(new Error('x'), { wireCode: 'made_up' }), 400), 'bad_request')
})

t.test('isNamedFailure and isOneOf', async t => {
  t.ok(isNamedFailure(new TEST_ENGINE_GONE()), 'a 5xx with a wire code of its own')
  t.notOk(isNamedFailure(new TEST_BROKEN('x')), 'internal_error')
  t.notOk(isNamedFailure(new TEST_TOO_LARGE(1)), 'a 4xx')
  t.notOk(isNamedFailure(new Error('x')))
  const mod = { TEST_TOO_LARGE, TEST_BROKEN, helper: () => 1 }
  t.ok(isOneOf(new TEST_TOO_LARGE(1), mod))
  t.notOk(isOneOf(new TEST_ENGINE_GONE(), mod))
  t.notOk(isOneOf(Object.assign(new Error('x'), { code: 'TEST_TOO_LARGE' }), mod), 'by identity, not by code')
})

t.test('the handler: wire code, extra fields and headers below 500; a reference and the log at 500', async t => {
  const lines: string[] = []
  const app = Fastify({ logger: { level: 'error', stream: { write: (line: string) => { lines.push(line) } } } })
  app.setErrorHandler(errorHandler)
  app.get('/413', async () => { throw Object.assign(new TEST_TOO_LARGE(5), { extra: { limit: 5 }, headers: { 'x-limit': '5' } }) })
  app.get('/503', async () => { throw new TEST_ENGINE_GONE() })
  app.get('/500', async () => { throw new TEST_BROKEN('/var/lib/secret-place') })
  t.teardown(async () => await app.close())
  const tooLarge = await app.inject('/413')
  t.same(tooLarge.json(), { error: 'too_large_here', detail: 'more than 5 bytes', limit: 5 })
  t.equal(tooLarge.headers['x-limit'], '5')
  t.same((await app.inject('/503')).json().error, 'engine_gone')
  const broken = await app.inject('/500')
  t.equal(broken.json().error, INTERNAL_ERROR)
  t.notMatch(broken.body, /secret-place/, 'the message stays in the log')
  t.match(lines.join(''), /secret-place/)
})

t.test('errorResult: one text block beginning Error:, at most 2,000 code points', async t => {
  t.same(errorResult('no such file'), { isError: true, content: [{ type: 'text', text: 'Error: no such file' }] })
  t.same(errorResult('Error: already prefixed').content, [{ type: 'text', text: 'Error: already prefixed' }])
  const long = (errorResult('x'.repeat(5000)).content[0] as { text: string }).text
  t.equal(long.length, MAX_TOOL_ERROR_CHARS)
  t.ok(long.endsWith('…'))
  const astral = (errorResult('😀'.repeat(1995)).content[0] as { text: string }).text
  t.equal(Array.from(astral).length, MAX_TOOL_ERROR_CHARS, 'counted in code points')
  t.notMatch(astral, /[\ud800-\udbff](?![\udc00-\udfff])/, 'no half surrogate pair')
  const fits = `${'a'.repeat(1992)}😀`
  t.equal((errorResult(fits).content[0] as { text: string }).text, `Error: ${fits}`, 'exactly 2,000 code points are kept whole')
})
