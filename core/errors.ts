import { createError, type FastifyErrorConstructor } from '@fastify/error'
import { errorCodes } from 'fastify'
import Type from 'typebox'

/*
 * Every error is defined once, with defineError(), in its owner's errors module (this file for core/,
 * plugins/<name>/errors.ts for a plugin): its code (logs, `err.code`, what other plugins compare), its
 * wire code (the `error` of the HTTP body), its status and its message template. docs/errors.md lists
 * them all, and a test holds that list complete.
 */

/** The wire code of a 5xx whose cause stays in the server log: the body carries only a reference. */
export const INTERNAL_ERROR = 'internal_error'

/** An error constructor made by defineError(): a FastifyError constructor that also knows its wire code. */
export type ErrorDefinition<C extends string = string> = FastifyErrorConstructor<{ code: C, statusCode: number, wireCode: string }> & {
  readonly code: C
  readonly wire: string
  readonly statusCode: number
  readonly message: string
}

const WIRE_CODE = /^(?:[a-z][a-z0-9]*(?:_[a-z0-9]+)*|Unauthorized)$/
/** Every definition by its code: plugins never import each other's errors, they compare codes (`err.code === 'SANDBOX_NOT_RUNNING'`). */
const definitions = new Map<string, ErrorDefinition>()

/**
 * Defines an error: `new X(...args)` formats `message` with the args (`%s`, `%d`; a last argument
 * `{ cause }` becomes the cause), as @fastify/error does. `wire` is what the HTTP body's `error` says;
 * a 5xx whose details are for the log only says INTERNAL_ERROR. The wire code is a property of the
 * constructor's prototype, so every instance carries it and nothing needs to derive it from the code.
 */
export function defineError<C extends string> (code: C, wire: string, message: string, statusCode: number, Base?: ErrorConstructor): ErrorDefinition<C> {
  if (!WIRE_CODE.test(wire)) throw new TypeError(`${code}: the wire code '${wire}' is not snake_case`)
  if (wire === INTERNAL_ERROR && statusCode < 500) throw new TypeError(`${code}: only a 5xx may answer ${INTERNAL_ERROR}`)
  if (definitions.has(code)) throw new TypeError(`the error ${code} is defined twice`)
  const ctor = createError(code, message, statusCode, Base)
  Object.defineProperty(ctor.prototype, 'wireCode', { value: wire })
  for (const [key, value] of Object.entries({ code, wire, statusCode, message })) {
    Object.defineProperty(ctor, key, { value, enumerable: true })
  }
  const definition = ctor as unknown as ErrorDefinition<C>
  definitions.set(code, definition)
  return definition
}

/**
 * The definition `err` was made from; else the one whose code and status it carries (an error that
 * crossed a plugin boundary by code, as a test's fake engine throws them).
 */
export function definitionOf (err: unknown): ErrorDefinition | undefined {
  if (typeof err !== 'object' || err === null) return undefined
  if (isErrorDefinition(err.constructor)) return err.constructor
  const { code, statusCode } = err as { code?: unknown, statusCode?: unknown }
  const definition = typeof code === 'string' ? definitions.get(code) : undefined
  return definition?.statusCode === statusCode ? definition : undefined
}

/** Is `value` a constructor made by defineError()? */
export function isErrorDefinition (value: unknown): value is ErrorDefinition {
  return typeof value === 'function' && typeof (value as { wire?: unknown }).wire === 'string' &&
    typeof (value.prototype as { wireCode?: unknown } | undefined)?.wireCode === 'string'
}

/** Is `err` an instance of one of the definitions a module exports (`import * as errors from './errors.js'`)? */
export function isOneOf (err: unknown, definitions: Record<string, unknown>): boolean {
  return typeof err === 'object' && err !== null &&
    Object.values(definitions).some(d => isErrorDefinition(d) && err instanceof d)
}

export const CORE_INVALID_CONFIG = defineError('CORE_INVALID_CONFIG', INTERNAL_ERROR, 'Invalid setting %s: %s', 500, TypeError)
export const CORE_INVALID_PLUGIN_OPTIONS = defineError('CORE_INVALID_PLUGIN_OPTIONS', INTERNAL_ERROR, "Invalid options for plugin '%s': %s", 500, TypeError)
export const CORE_INVALID_CHAT_ID = defineError('CORE_INVALID_CHAT_ID', 'invalid_chat_id', 'invalid chat id: %s', 400)
export const CORE_UNAUTHORIZED = defineError('CORE_UNAUTHORIZED', 'Unauthorized', 'missing or invalid credentials', 401)
export const CORE_FORBIDDEN = defineError('CORE_FORBIDDEN', 'forbidden', '%s', 403)
/** A browser page whose Origin may not use a chat route (core/origin.ts). */
export const CORE_FORBIDDEN_ORIGIN = defineError('CORE_FORBIDDEN_ORIGIN', 'forbidden_origin', 'this page\'s Origin may not use this route: only pages of PUBLIC_BASE_URL and ALLOWED_ORIGINS may, and an embedded (opaque-origin) page only with a capability token', 403)
export const CORE_TOO_MANY_FAILURES = defineError('CORE_TOO_MANY_FAILURES', 'too_many_requests', 'too many failed authentication attempts; retry later', 429)
/** The path breaks a syntax rule of docs/contract.md#path-rules. */
export const CORE_INVALID_PATH = defineError('CORE_INVALID_PATH', 'invalid_path', 'invalid path: %s', 400)
/** The path names a directory where a file is required. */
export const CORE_PATH_IS_DIRECTORY = defineError('CORE_PATH_IS_DIRECTORY', 'path_is_directory', 'the path is a directory, not a file', 400)
/** Nothing at that path (or a parent is not a directory). */
export const CORE_PATH_NOT_FOUND = defineError('CORE_PATH_NOT_FOUND', 'path_not_found', 'file not found', 404)
/** No route has this path (the not-found handler, core/app.ts). */
export const CORE_ROUTE_NOT_FOUND = defineError('CORE_ROUTE_NOT_FOUND', 'not_found', 'no such route', 404)
/** A route has this path but not this method; the answer lists the methods in `Allow`. */
export const CORE_METHOD_NOT_ALLOWED = defineError('CORE_METHOD_NOT_ALLOWED', 'method_not_allowed', '%s is not supported here; use %s', 405)

/** The body of an error a route answers itself, as the error handler would below 500: `{ error, detail }`. */
export function errorBody (err: Error): { error: string, detail: string } {
  const definition = definitionOf(err)
  if (definition === undefined || definition.statusCode >= 500) throw new TypeError('errorBody takes a defined error below 500')
  return { error: definition.wire, detail: err.message }
}

/** Every non-MCP error body (docs/contract.md#general-http-rules): `{"error": <wire code>, "detail": <text>}`, plus fields some errors add. */
export const ErrorResponse = Type.Object({
  error: Type.String({ description: 'snake_case code' }),
  detail: Type.String({ description: 'human readable explanation' })
}, { additionalProperties: true })

/** Fastify's own errors that reach our handler, by their constructors (fastify's `errorCodes`). */
export const FRAMEWORK_WIRE: ReadonlyArray<readonly [FastifyErrorConstructor, string]> = [
  [errorCodes.FST_ERR_CTP_BODY_TOO_LARGE, 'payload_too_large'],
  [errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE, 'unsupported_media_type'],
  [errorCodes.FST_ERR_CTP_EMPTY_JSON_BODY, 'bad_request'],
  [errorCodes.FST_ERR_CTP_INVALID_JSON_BODY, 'bad_request'],
  [errorCodes.FST_ERR_NOT_FOUND, 'not_found']
]

/**
 * The wire code of any error: its definition's, else fastify's table above, else by status (another
 * library's error: internal_error for a 5xx, not_found for a 404, bad_request otherwise).
 */
export function wireCodeOf (err: unknown, status: number): string {
  const definition = definitionOf(err)
  if (definition !== undefined) return definition.wire
  for (const [ctor, wire] of FRAMEWORK_WIRE) if (err instanceof ctor) return wire
  return status >= 500 ? INTERNAL_ERROR : status === 404 ? 'not_found' : 'bad_request'
}

/** A 5xx that names itself on the wire (capacity_reached, image_missing, …): a person can act on it, so callers pass it on as it is. */
export function isNamedFailure (err: unknown): boolean {
  const definition = definitionOf(err)
  const status = (err as { statusCode?: unknown } | null)?.statusCode
  return definition !== undefined && definition.wire !== INTERNAL_ERROR && typeof status === 'number' && status >= 500
}
