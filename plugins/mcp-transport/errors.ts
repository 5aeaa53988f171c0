import { createError } from '@fastify/error'

export const MCP_DUPLICATE_TOOL = createError('MCP_DUPLICATE_TOOL', "A tool named '%s' is already registered", 500, TypeError)
export const MCP_REGISTRY_SEALED = createError('MCP_REGISTRY_SEALED', 'MCP capabilities must be registered while plugins load (%s)', 500)

/**
 * A JSON-RPC protocol error whose wire message is `message` as written. The SDK's McpError would put
 * "MCP error <code>: " into the message, and clients add that prefix again when they show it.
 */
export function protocolError (code: number, message: string, data?: unknown): Error {
  return Object.assign(new Error(message), { code, ...(data !== undefined && { data }) })
}
