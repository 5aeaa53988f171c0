import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyBaseLogger } from 'fastify'
import type { Static, TObject } from 'typebox'
import type { CallToolResult, JSONObject, Resource, ReadResourceResult, Tool, ToolAnnotations } from '@modelcontextprotocol/server'
import type { ChatResolution, RequestUser } from '../../core/identity.js'

/** What every provider learns about the MCP request it serves. */
export interface McpRequestContext {
  /** The HTTP request id; internal errors cite it as `ref`. */
  requestId: string
  /** The chat decided from the headers under SINGLE_USER_MODE (core/identity.ts). */
  resolution: ChatResolution
  user: RequestUser
  headers: IncomingHttpHeaders
  log: FastifyBaseLogger
  /**
   * The protocol extensions this client declared in its capabilities, among those a tool or transform
   * names (2025-era: remembered in the session id from initialize; 2026-07-28: the request's envelope).
   */
  clientExtensions?: ReadonlySet<string>
}

/** A context whose chat is resolved and valid. */
export interface ChatRequestContext extends McpRequestContext { chatId: string }

/** The human's answer to a URL-mode elicitation (docs/contract.md#url-elicitation). */
export type ElicitationAction = 'accept' | 'decline' | 'cancel'
/** What the client shows the human: why, and the URL to open (never a secret in it that the page would not check). */
export interface UrlElicitation { message: string, url: string, elicitationId: string }

/** A URL-mode elicitation embedded in a 2026-07-28 `input_required` answer (MCP's `inputRequests` entry). */
export interface UrlInputRequest { method: 'elicitation/create', params: { mode: 'url', message: string, url: string } }

/**
 * A tool's answer on 2026-07-28 that asks the client for input first (the multi-round-trip pattern): the
 * client asks the human, then calls the tool again with the same arguments, the answers and `state`
 * (docs/contract.md#url-elicitation). Only when `ctx.inputRound?.url` says the client can.
 */
export interface ToolInputRequired {
  content?: never
  inputRequired: {
    /** By key; the retried call's `ctx.inputRound.resumed.responses` has the client's answer under the same key. */
    requests: Record<string, UrlInputRequest>
    /** What the tool needs to go on; it comes back only to this tool of this chat, unchanged (HMAC), within 15 min. */
    state: JSONObject
  }
}

/** What a 2026-07-28 tool call knows about the multi-round-trip pattern. */
export interface InputRound {
  /** The client declared `elicitation.url`: the tool may answer with URL-mode input requests. */
  url: boolean
  /** A retried call: the tool's own state from its `inputRequired` answer, and the client's answers by key (untrusted). */
  resumed?: { state: JSONObject, responses: Record<string, unknown> }
}

export interface ToolCallContext extends ChatRequestContext {
  /** Aborted on notifications/cancelled for this call, or when the client disconnects from its stream. */
  signal: AbortSignal
  /** True when the client sent `_meta.progressToken`. */
  wantsProgress: boolean
  /** Sends notifications/progress on the call's stream; a no-op without a progress token. */
  progress (progress: number, total: number | undefined, message: string): Promise<void>
  /**
   * Asks the human, through the client, to open a URL (MCP URL-mode elicitation, docs/contract.md#url-elicitation).
   * Present only when the client declared `elicitation.url` and this call can carry a request to it (a
   * 2025-11-25 call streamed as SSE). Resolves with the human's action once the client answers; rejects
   * after `timeoutMs`, when the call is cancelled, or when the client answers with an error.
   */
  elicitUrl?: (request: UrlElicitation, timeoutMs: number) => Promise<ElicitationAction>
  /** Present on 2026-07-28 calls (no server-to-client requests there): see InputRound and ToolInputRequired. */
  inputRound?: InputRound
}

export interface ToolDefinition<S extends TObject = TObject> {
  name: string
  description: string
  /** JSON Schema of the arguments; unknown extra arguments are ignored, integers accept numeric strings. */
  inputSchema: S
  annotations?: ToolAnnotations
  /** Position in tools/list (lower first). The five built-in tools use 10–50; the default is 1000. */
  order?: number
  /**
   * A client extension id (e.g. `io.modelcontextprotocol/ui`): the tool is listed and callable only for
   * clients that declared it; every other client sees no such tool (`Unknown tool`).
   */
  extension?: string
  /** `_meta` of the tools/list entry. */
  _meta?: JSONObject
  /** Rewrites raw arguments before validation (e.g. `view_range` given as the string "[1,20]"). */
  prepare?: (args: Record<string, unknown>) => Record<string, unknown>
  /**
   * Runs the tool for a resolved chat. Return a result (set isError for failures). A thrown error whose
   * `expose` is true (or a coded FastifyError with status ≠ 500) becomes `Error: <message>`; anything else
   * becomes `Error: internal error (ref <request id>)` and is logged.
   */
  handler: (args: Static<S>, ctx: ToolCallContext) => Promise<CallToolResult | ToolInputRequired>
}

export interface ResourceProvider {
  /** Resources of the request's chat. */
  list: (ctx: ChatRequestContext) => Promise<Resource[]>
  /** Contents for a URI this provider owns, or undefined when the URI is not its own or not found. */
  read: (uri: string, ctx: ChatRequestContext) => Promise<ReadResourceResult['contents'] | undefined>
}

/** Returns the instructions for an initialize request, or undefined to let the next provider answer. */
export type InstructionsProvider = (ctx: McpRequestContext) => Promise<string | undefined>

/** Rewrites the tools/list entries (tier 1 appends to descriptions); runs in registration order. */
export type ToolListTransform = (tools: Tool[]) => Tool[]

/**
 * Rewrites a finished tool call's result for clients that declared an extension (MCP Apps: `_meta` for
 * the view); runs after the tool, in registration order. It must keep the text content.
 */
export type ToolResultTransform = (call: { tool: string, args: Record<string, unknown>, result: CallToolResult, ctx: ToolCallContext }) => Promise<CallToolResult>

/**
 * How one tools/call of a registered tool ended. `rejected`: refused before the handler ran (chat id,
 * arguments, per-chat cap); `error`: the handler's result had isError (or it threw); `cancelled`: the
 * client cancelled it, no result was sent; `shutdown`: a server shutdown stopped it (the client got an
 * error result saying so).
 */
export type ToolCallOutcome = 'ok' | 'error' | 'rejected' | 'cancelled' | 'shutdown'

/** Told once per finished tools/call (metrics). Never carries arguments, output or the chat id. */
export interface ToolCallEvent { tool: string, outcome: ToolCallOutcome, durationMs: number }
export type ToolCallObserver = (event: ToolCallEvent) => void

/**
 * An /mcp JSON-RPC request that named no chat: no X-Chat-Id or X-OpenWebUI-Chat-Id and no OAuth user.
 * `mode` lenient: it used the shared `default` chat (a tool call ran there, with the note); strict
 * (SINGLE_USER_MODE=false): a tool call was refused. `method` is one of MCP_METHODS or `other`.
 * Never told under SINGLE_USER_MODE=true, where no chat id is expected.
 */
export interface ChatlessRequestEvent { method: string, mode: 'lenient' | 'strict' }
export type ChatlessRequestObserver = (event: ChatlessRequestEvent) => void

/**
 * One request method of a protocol extension (docs/contract.md#extensions). `params` is checked first (a
 * missing params object counts as `{}`; a mismatch is -32602); the handler answers for the request's
 * context, or throws a protocolError. On 2026-07-28 the transport adds `ttlMs: 0, cacheScope: "private"`.
 */
export interface ExtensionMethod<S extends TObject = TObject> {
  params: S
  handler: (params: Static<S>, ctx: McpRequestContext) => Promise<Record<string, unknown>>
}

/** A protocol extension: advertised as `capabilities.extensions[id] = settings`, served by its own methods. */
export interface ExtensionDefinition {
  /** The extension identifier, e.g. `io.modelcontextprotocol/skills`. */
  id: string
  /** The settings object advertised under the identifier (`{}`: supported, no optional features). */
  settings: JSONObject
  /** Request methods by name; none may be a method the transport already serves or another extension's. */
  methods: Record<string, ExtensionMethod>
}

/** A server-initiated message for the GET streams of one chat. */
export interface ChatNotification { method: string, params?: Record<string, unknown> }

export interface McpRegistry {
  /** Register while plugins load. Throws on a duplicate name. */
  addTool<S extends TObject> (def: ToolDefinition<S>): void
  addResourceProvider (provider: ResourceProvider): void
  /** Register while plugins load. Throws on a duplicate extension id or method name. */
  addExtension (def: ExtensionDefinition): void
  /** Higher priority is asked first; the first non-empty answer wins (tier 4 dynamic > tier 3 static). */
  addInstructions (priority: number, provider: InstructionsProvider): void
  /** With `extension`: applied only to the lists of clients that declared that extension. */
  transformToolList (transform: ToolListTransform, opts?: { extension?: string }): void
  /** Applied to successful results of clients that declared `extension`. Register while plugins load. */
  transformToolResult (extension: string, transform: ToolResultTransform): void
  /**
   * The tools/list entries after transforms, for a client that declared `extensions` (none: the plain
   * list every other client sees), computed once per combination after boot.
   */
  listTools (extensions?: ReadonlySet<string>): Tool[]
  /**
   * Observes every finished tools/call of a registered tool, after its result is decided (unknown
   * tool names are protocol errors and not reported). Observers run synchronously in registration
   * order; one that throws is logged and skipped. Register while plugins load.
   */
  onToolCall (observer: ToolCallObserver): void
  /** Observes every /mcp request without a chat id (metrics), like onToolCall. Register while plugins load. */
  onChatlessRequest (observer: ChatlessRequestObserver): void
  /** Delivers a notification on every open GET /mcp stream of that chat; returns how many streams got it. */
  notifyChat (chatId: string, notification: ChatNotification): number
}

declare module 'fastify' {
  interface FastifyInstance { mcp: McpRegistry }
}
