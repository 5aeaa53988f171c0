import { defineError, INTERNAL_ERROR } from '../../core/errors.js'

export const MCP_DUPLICATE_TOOL = defineError('MCP_DUPLICATE_TOOL', INTERNAL_ERROR, "A tool named '%s' is already registered", 500, TypeError)
export const MCP_REGISTRY_SEALED = defineError('MCP_REGISTRY_SEALED', INTERNAL_ERROR, 'MCP capabilities must be registered while plugins load (%s)', 500)

/**
 * A JSON-RPC protocol error whose wire message is `message` as written. The SDK's McpError would put
 * "MCP error <code>: " into the message, and clients add that prefix again when they show it.
 */
export function protocolError (code: number, message: string, data?: unknown): Error {
  return Object.assign(new Error(message), { code, ...(data !== undefined && { data }) })
}
