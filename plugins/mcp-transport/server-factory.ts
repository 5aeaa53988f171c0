import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv'
import {
  CallToolRequestSchema, ErrorCode, ListResourcesRequestSchema, ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema, ReadResourceRequestSchema, type CallToolResult, type Resource
} from '@modelcontextprotocol/sdk/types.js'
import { SERVER_NAME, SERVER_VERSION } from '../../core/version.js'
import { protocolError } from './errors.js'
import type { RegistryInternals } from './registry.js'
import type { ToolRunner } from './tool-call.js'
import type { ChatRequestContext, McpRequestContext } from './types.js'

const PAGE_SIZE = 500
// One validator for every per-request Server: building Ajv per request costs ~0.25 ms (we never
// validate output schemas, but the Server constructor would create one).
const sharedValidator = new AjvJsonSchemaValidator()

const RESOURCE_NOT_FOUND = -32002

function chatContext (ctx: McpRequestContext): ChatRequestContext | undefined {
  return ctx.resolution.kind === 'chat' ? { ...ctx, chatId: ctx.resolution.chatId } : undefined
}

function decodeCursor (cursor: string | undefined): number {
  if (cursor === undefined) return 0
  const n = Number(Buffer.from(cursor, 'base64url').toString('utf8'))
  if (!Number.isInteger(n) || n < 0) throw protocolError(ErrorCode.InvalidParams, 'invalid cursor')
  return n
}

export interface ServerDeps {
  registry: RegistryInternals
  runner: ToolRunner
}

/**
 * Builds the SDK server for one HTTP request (the SDK's stateless pattern: instructions are
 * constructor-only, and they differ per chat). Handlers close over this request's context.
 */
export function createRequestServer (deps: ServerDeps, ctx: McpRequestContext, instructions: string | undefined, onCancelled: () => void): Server {
  const { registry, runner } = deps
  const server = new Server({ name: SERVER_NAME, version: SERVER_VERSION }, {
    capabilities: { tools: { listChanged: false }, resources: { subscribe: false, listChanged: true } },
    ...(instructions !== undefined && { instructions }),
    jsonSchemaValidator: sharedValidator
  })

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: registry.listTools() }))

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const progressToken = request.params._meta?.progressToken
    const result = await runner.run({
      ctx,
      name: request.params.name,
      args: request.params.arguments ?? {},
      requestId: extra.requestId,
      ...(progressToken !== undefined && { progressToken }),
      signal: extra.signal,
      sendProgress: async params => { await extra.sendNotification({ method: 'notifications/progress', params }) }
    })
    if (result === undefined) {
      onCancelled()
      return { content: [] }
    }
    return result
  })

  server.setRequestHandler(ListResourcesRequestSchema, async request => {
    const chat = chatContext(ctx)
    if (chat === undefined) return { resources: [] }
    const offset = decodeCursor(request.params?.cursor)
    const all: Resource[] = []
    for (const provider of registry.resourceProviders()) all.push(...await provider.list(chat))
    const page = all.slice(offset, offset + PAGE_SIZE)
    const next = offset + PAGE_SIZE < all.length ? Buffer.from(String(offset + PAGE_SIZE)).toString('base64url') : undefined
    return { resources: page, ...(next !== undefined && { nextCursor: next }) }
  })

  server.setRequestHandler(ReadResourceRequestSchema, async request => {
    const chat = chatContext(ctx)
    if (chat !== undefined) {
      for (const provider of registry.resourceProviders()) {
        const contents = await provider.read(request.params.uri, chat)
        if (contents !== undefined) return { contents }
      }
    }
    throw protocolError(RESOURCE_NOT_FOUND, 'Resource not found', { uri: request.params.uri })
  })

  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: [] }))
  return server
}
