import { createError } from '@fastify/error'

export const MCP_DUPLICATE_TOOL = createError('MCP_DUPLICATE_TOOL', "A tool named '%s' is already registered", 500, TypeError)
export const MCP_REGISTRY_SEALED = createError('MCP_REGISTRY_SEALED', 'MCP capabilities must be registered while plugins load (%s)', 500)
