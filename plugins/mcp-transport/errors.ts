import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

/** An extension id, or a method name that the transport or another extension already serves. */
export const MCP_DUPLICATE_EXTENSION = defineError('MCP_DUPLICATE_EXTENSION', INTERNAL_ERROR, "The MCP extension or method '%s' is already registered", 500, TypeError)
export const MCP_DUPLICATE_TOOL = defineError('MCP_DUPLICATE_TOOL', INTERNAL_ERROR, "A tool named '%s' is already registered", 500, TypeError)
/** A browser Origin that may not call /mcp (listed ones get CORS headers). */
export const MCP_FORBIDDEN_ORIGIN = defineError('MCP_FORBIDDEN_ORIGIN', 'forbidden', 'Origin not allowed: set PUBLIC_BASE_URL or ALLOWED_ORIGINS to the browser origin that calls /mcp', 403)
/** A CORS preflight or other method /mcp does not take, from an Origin that is not listed. */
export const MCP_METHOD_NOT_ALLOWED = defineError('MCP_METHOD_NOT_ALLOWED', 'method_not_allowed', 'use GET, POST or DELETE', 405)
/** GET /mcp with Last-Event-ID: streams are not resumed (405 tells SDK clients to stop waiting). */
export const MCP_RESUMPTION_NOT_SUPPORTED = defineError('MCP_RESUMPTION_NOT_SUPPORTED', 'resumption_not_supported',
  'this server does not resume SSE streams (Last-Event-ID); an interrupted request was cancelled, send it again. GET without Last-Event-ID opens the notification stream.', 405)
/** GET /mcp that does not accept an event stream. */
export const MCP_NOT_ACCEPTABLE = defineError('MCP_NOT_ACCEPTABLE', 'not_acceptable', 'GET /mcp is an event stream: send Accept: text/event-stream', 406)
export const MCP_REGISTRY_SEALED = defineError('MCP_REGISTRY_SEALED', INTERNAL_ERROR, 'MCP capabilities must be registered while plugins load (%s)', 500)

/**
 * A JSON-RPC protocol error whose wire message is `message` as written. The SDK's McpError would put
 * "MCP error <code>: " into the message, and clients add that prefix again when they show it.
 */
export function protocolError (code: number, message: string, data?: unknown): Error {
  return Object.assign(new Error(message), { code, ...(data !== undefined && { data }) })
}
