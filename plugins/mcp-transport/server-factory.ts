import { CLIENT_CAPABILITIES_META_KEY, inputRequired, ProtocolErrorCode, ResourceNotFoundError, Server, type CacheHint, type CallToolResult, type Icon, type InputRequiredResult, type JSONObject, type RequestStateCodec, type Resource, type ServerContext, type ServerOptions } from '@modelcontextprotocol/server'
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/server/validators/ajv'
import { SERVER_NAME, SERVER_VERSION } from '../../core/version.js'
import { protocolError } from './errors.js'
import type { RegistryInternals } from './registry.js'
import { SERVED_PROTOCOL_VERSIONS } from './schemas.js'
import { isInputRequired, type ToolRunner, type UrlElicitor } from './tool-call.js'
import { declaresUrlElicitation } from './session.js'
import type { ChatRequestContext, InputRound, McpRequestContext } from './types.js'

const PAGE_SIZE = 500
// One validator for every per-request Server: building Ajv per request costs ~0.25 ms (we never
// validate output schemas, but the Server constructor would create one).
const sharedValidator = new AjvJsonSchemaValidator()

/** Lists that are the same for every caller may be kept by shared caches a minute (docs/contract.md#protocol-revisions). */
const SHARED: CacheHint = { ttlMs: 60000, cacheScope: 'public' }
/** Lists and reads that depend on the chat (its uploads, its rendered prompt): the requesting client only, never reused. */
const PER_CHAT: CacheHint = { ttlMs: 0, cacheScope: 'private' }
const CACHE_HINTS: ServerOptions['cacheHints'] = {
  'tools/list': SHARED,
  'prompts/list': SHARED,
  'resources/templates/list': SHARED,
  'resources/list': PER_CHAT,
  'resources/read': PER_CHAT,
  'server/discover': PER_CHAT
}

function chatContext (ctx: McpRequestContext): ChatRequestContext | undefined {
  return ctx.resolution.kind === 'chat' ? { ...ctx, chatId: ctx.resolution.chatId } : undefined
}

function decodeCursor (cursor: string | undefined): number {
  if (cursor === undefined) return 0
  const n = Number(Buffer.from(cursor, 'base64url').toString('utf8'))
  if (!Number.isInteger(n) || n < 0) throw protocolError(ProtocolErrorCode.InvalidParams, 'invalid cursor')
  return n
}

export interface ServerDeps {
  registry: RegistryInternals
  runner: ToolRunner
  /** serverInfo.icons (docs/contract.md#icons); none when empty. */
  serverIcons: Icon[]
  /** Seals a tool's state into 2026-07-28 `requestState` and opens it again (HMAC, expiry). */
  requestState: RequestStateCodec<SealedState>
}

/** What a `requestState` carries: the tool's state, bound to its chat and tool. */
export interface SealedState { chat: string, tool: string, state: JSONObject }

/**
 * A 2026-07-28 call's input round: whether the client declared URL-mode elicitation (in this request's
 * envelope) and, on a retry, the tool's state, opened only when it was sealed by this server for the
 * same chat and tool and has not expired (else -32602), with the client's answers.
 */
async function inputRound (deps: ServerDeps, extra: ServerContext, chat: string, tool: string): Promise<InputRound> {
  const url = declaresUrlElicitation({ capabilities: (extra.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY] })
  const raw = extra.mcpReq.requestState<unknown>()
  if (raw === undefined) return { url }
  const refused = protocolError(ProtocolErrorCode.InvalidParams, 'Invalid or expired requestState')
  if (typeof raw !== 'string' || raw.length > 262144) throw refused
  let sealed: SealedState
  try { sealed = await deps.requestState.verify(raw, extra) } catch { throw refused }
  if (sealed.chat !== chat || sealed.tool !== tool) throw refused
  const responses = extra.mcpReq.inputResponses
  return { url, resumed: { state: sealed.state, responses: responses !== null && typeof responses === 'object' ? responses : {} } }
}

export interface RequestServerOptions {
  /** The protocol era the instance serves: 2025-era (initialize, one exchange) or 2026-07-28 (per-request envelope). */
  era: 'legacy' | 'modern'
  /** Per chat, so per request (initialize, server/discover); constructor-only in the SDK. */
  instructions: string | undefined
  /** Told when a tools/call was cancelled: its response must not be sent. */
  onCancelled?: () => void
  /** URL-mode elicitation for this request's tools/call, when the client and the stream allow it (docs/contract.md#url-elicitation). */
  elicitUrl?: UrlElicitor
}

/**
 * Builds the SDK server for one HTTP request, for either protocol era (the SDK's per-request pattern:
 * instructions are constructor-only, and they differ per chat). Handlers close over this request's
 * context; one definition serves both eras, so they cannot drift apart.
 */
export function createRequestServer (deps: ServerDeps, ctx: McpRequestContext, opts: RequestServerOptions): Server {
  const { registry, runner } = deps
  const extensions = registry.extensions()
  const server = new Server({ name: SERVER_NAME, version: SERVER_VERSION, ...(deps.serverIcons.length > 0 && { icons: deps.serverIcons }) }, {
    capabilities: {
      tools: { listChanged: false },
      resources: { subscribe: false, listChanged: true },
      prompts: { listChanged: false },
      ...(extensions.length > 0 && { extensions: Object.fromEntries(extensions.map(e => [e.id, e.settings])) })
    },
    ...(opts.instructions !== undefined && { instructions: opts.instructions }),
    supportedProtocolVersions: [...SERVED_PROTOCOL_VERSIONS],
    cacheHints: CACHE_HINTS,
    jsonSchemaValidator: sharedValidator
  })

  server.setRequestHandler('tools/list', async () => {
    const tools = registry.listTools(ctx.clientExtensions)
    // A list shaped by the client's extensions (MCP Apps) is that client's: never for shared caches.
    return opts.era === 'modern' && tools !== registry.listTools() ? { tools, ...PER_CHAT } : { tools }
  })

  server.setRequestHandler('tools/call', async (request, extra): Promise<CallToolResult | InputRequiredResult> => {
    const progressToken = request.params._meta?.progressToken
    const chat = ctx.resolution.kind === 'chat' ? ctx.resolution.chatId : ''
    const round = opts.era === 'modern' ? await inputRound(deps, extra, chat, request.params.name) : undefined
    const result = await runner.run({
      ctx,
      name: request.params.name,
      args: request.params.arguments ?? {},
      requestId: extra.mcpReq.id,
      ...(progressToken !== undefined && { progressToken }),
      signal: extra.mcpReq.signal,
      sendProgress: async params => { await extra.mcpReq.notify({ method: 'notifications/progress', params }) },
      ...(opts.elicitUrl !== undefined && { elicitUrl: opts.elicitUrl }),
      ...(round !== undefined && { inputRound: round })
    })
    if (result === undefined) {
      opts.onCancelled?.()
      return { content: [] }
    }
    if (isInputRequired(result)) {
      const { requests, state } = result.inputRequired
      // The SDK's builder: the 2026-07-28 URL-mode shape (no elicitationId; the state correlates the rounds).
      const inputRequests = Object.fromEntries(Object.entries(requests).map(([key, r]) => [key, inputRequired.elicitUrl({ message: r.params.message, url: r.params.url })]))
      return inputRequired({ inputRequests, requestState: await deps.requestState.mint({ chat, tool: request.params.name, state }) })
    }
    return result
  })

  server.setRequestHandler('resources/list', async request => {
    const chat = chatContext(ctx)
    if (chat === undefined) return { resources: [] }
    const offset = decodeCursor(request.params?.cursor)
    const all: Resource[] = []
    for (const provider of registry.resourceProviders()) all.push(...await provider.list(chat))
    const page = all.slice(offset, offset + PAGE_SIZE)
    const next = offset + PAGE_SIZE < all.length ? Buffer.from(String(offset + PAGE_SIZE)).toString('base64url') : undefined
    return { resources: page, ...(next !== undefined && { nextCursor: next }) }
  })

  server.setRequestHandler('resources/read', async request => {
    const chat = chatContext(ctx)
    const { uri } = request.params
    if (chat !== undefined) {
      for (const provider of registry.resourceProviders()) {
        const contents = await provider.read(uri, chat)
        if (contents !== undefined) return { contents }
      }
    }
    // -32602 with data.uri on every revision (the SDK encodes it so for 2025-era clients too; they
    // recognise it by data.uri, docs/contract.md#tier-5-uploads-as-mcp-resources).
    throw new ResourceNotFoundError(uri, 'Resource not found')
  })

  // Extension methods (docs/contract.md#extensions): the SDK puts no cache fields on results it does not
  // know, so they are added here on 2026-07-28; every extension result depends on the caller.
  for (const { name, method, params } of extensions.flatMap(e => e.methods)) {
    server.setRequestHandler(name, { params }, async (args: unknown) => {
      const result = await method.handler(args as Record<string, unknown>, ctx)
      return opts.era === 'modern' ? { ...result, ...PER_CHAT } : result
    })
  }

  server.setRequestHandler('resources/templates/list', async () => ({ resourceTemplates: [] }))
  // No prompts by contract (docs/contract.md#initialize-result); a prompt named `system` never exists.
  server.setRequestHandler('prompts/list', async () => ({ prompts: [] }))
  server.setRequestHandler('prompts/get', async () => { throw protocolError(ProtocolErrorCode.InvalidParams, 'Prompt not found') })
  return server
}
