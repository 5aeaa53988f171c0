import type { TObject } from 'typebox'
import { Compile, type Validator } from 'typebox/compile'
import Value from 'typebox/value'
import type { JSONObject, StandardSchemaV1, Tool } from '@modelcontextprotocol/server'
import { MCP_DUPLICATE_EXTENSION, MCP_DUPLICATE_TOOL, MCP_REGISTRY_SEALED } from './errors.js'
import type {
  ChatlessRequestEvent, ChatlessRequestObserver, ChatNotification, ExtensionDefinition, ExtensionMethod, InstructionsProvider, McpRegistry,
  McpRequestContext, ResourceProvider, ToolCallEvent, ToolCallObserver, ToolDefinition, ToolListTransform, ToolResultTransform
} from './types.js'

/** A registered tool with its validator compiled once at boot. */
export interface CompiledTool {
  def: ToolDefinition
  validator: Validator
}

/** An extension method with its params as the Standard Schema the SDK's custom-method handlers take. */
export interface CompiledMethod { name: string, method: ExtensionMethod, params: StandardSchemaV1 }
export interface CompiledExtension { id: string, settings: JSONObject, methods: CompiledMethod[] }

/** Methods the transport serves itself: an extension may not take them over. */
const OWN_METHODS = new Set(['initialize', 'ping', 'server/discover', 'subscriptions/listen', 'tools/list', 'tools/call', 'resources/list',
  'resources/read', 'resources/templates/list', 'resources/subscribe', 'resources/unsubscribe', 'prompts/list', 'prompts/get',
  'completion/complete', 'logging/setLevel'])

/** A TypeBox object schema as a Standard Schema (what the SDK validates custom-method params with); absent params are `{}`. */
function standardParams (schema: ExtensionMethod['params']): StandardSchemaV1 {
  const validator = Compile(schema)
  return {
    '~standard': {
      version: 1,
      vendor: 'typebox',
      validate: (raw: unknown) => {
        const value = raw ?? {}
        if (validator.Check(value)) return { value }
        return { issues: validator.Errors(value).slice(0, 5).map(e => ({ message: `${e.instancePath === '' ? 'params' : e.instancePath.slice(1)}: ${e.message}` })) }
      }
    }
  }
}

/** A sink for server-initiated messages on one open GET stream. */
export type StreamSink = (notification: ChatNotification) => void

export interface RegistryInternals extends McpRegistry {
  /** The tool, when it exists for a client that declared `extensions`. */
  tool (name: string, extensions?: ReadonlySet<string>): CompiledTool | undefined
  /** The client extension ids any tool or transform names: the only ones a request's capabilities are read for. */
  clientExtensionIds (): ReadonlySet<string>
  /** The result transforms for a client that declared `extensions`, in registration order. */
  resultTransforms (extensions: ReadonlySet<string> | undefined): ToolResultTransform[]
  resourceProviders (): readonly ResourceProvider[]
  extensions (): readonly CompiledExtension[]
  instructions (ctx: McpRequestContext): Promise<string | undefined>
  /** Subscribes a GET stream to its chat; returns the unsubscribe function. */
  subscribe (chatId: string, sink: StreamSink): () => void
  /** Tells every onToolCall observer; a throwing observer is logged and skipped. */
  toolCallEnded (event: ToolCallEvent, log: McpRequestContext['log']): void
  /** Tells every onChatlessRequest observer; a throwing observer is logged and skipped. */
  chatlessRequest (event: ChatlessRequestEvent, log: McpRequestContext['log']): void
  /** Freezes registration; called once plugins are loaded. */
  seal (): void
}

export function createMcpRegistry (): RegistryInternals {
  const tools = new Map<string, CompiledTool>()
  const providers: ResourceProvider[] = []
  const extensions: CompiledExtension[] = []
  const instructionProviders: Array<{ priority: number, provider: InstructionsProvider }> = []
  const transforms: Array<{ transform: ToolListTransform, extension?: string }> = []
  const resultTransforms: Array<{ transform: ToolResultTransform, extension: string }> = []
  const knownExtensions = new Set<string>()
  const streams = new Map<string, Set<StreamSink>>()
  const observers: ToolCallObserver[] = []
  const chatlessObservers: ChatlessRequestObserver[] = []
  let sealed = false
  const listed = new Map<string, Tool[]>()
  const declared = (extension: string | undefined, extensions: ReadonlySet<string> | undefined): boolean =>
    extension === undefined || extensions?.has(extension) === true

  const guard = (what: string): void => { if (sealed) throw new MCP_REGISTRY_SEALED(what) }

  return {
    addTool<S extends TObject> (def: ToolDefinition<S>) {
      guard(`addTool ${def.name}`)
      if (tools.has(def.name)) throw new MCP_DUPLICATE_TOOL(def.name)
      tools.set(def.name, { def: def as unknown as ToolDefinition, validator: Compile(def.inputSchema) })
      if (def.extension !== undefined) knownExtensions.add(def.extension)
    },
    addResourceProvider (provider) { guard('addResourceProvider'); providers.push(provider) },
    addExtension (def: ExtensionDefinition) {
      guard(`addExtension ${def.id}`)
      if (extensions.some(e => e.id === def.id)) throw new MCP_DUPLICATE_EXTENSION(def.id)
      const taken = new Set(extensions.flatMap(e => e.methods.map(m => m.name)))
      const methods = Object.entries(def.methods).map(([name, method]) => {
        if (OWN_METHODS.has(name) || taken.has(name)) throw new MCP_DUPLICATE_EXTENSION(name)
        return { name, method, params: standardParams(method.params) }
      })
      extensions.push({ id: def.id, settings: def.settings, methods })
    },
    addInstructions (priority, provider) {
      guard('addInstructions')
      instructionProviders.push({ priority, provider })
      instructionProviders.sort((a, b) => b.priority - a.priority)
    },
    transformToolList (transform, opts = {}) {
      guard('transformToolList')
      transforms.push({ transform, ...(opts.extension !== undefined && { extension: opts.extension }) })
      if (opts.extension !== undefined) knownExtensions.add(opts.extension)
    },
    transformToolResult (extension, transform) {
      guard('transformToolResult')
      resultTransforms.push({ transform, extension })
      knownExtensions.add(extension)
    },
    clientExtensionIds: () => knownExtensions,
    resultTransforms: extensions => resultTransforms.filter(t => declared(t.extension, extensions)).map(t => t.transform),
    onToolCall (observer) { guard('onToolCall'); observers.push(observer) },
    toolCallEnded (event, log) {
      for (const observer of observers) {
        try { observer(event) } catch (err) { log.error({ err }, 'tool call observer failed') }
      }
    },
    onChatlessRequest (observer) { guard('onChatlessRequest'); chatlessObservers.push(observer) },
    chatlessRequest (event, log) {
      for (const observer of chatlessObservers) {
        try { observer(event) } catch (err) { log.error({ err }, 'chatless request observer failed') }
      }
    },
    listTools (extensions) {
      const key = [...knownExtensions].filter(id => extensions?.has(id) === true).sort().join(' ')
      const cached = listed.get(key)
      if (cached !== undefined) return cached
      const entries = [...tools.values()]
        .filter(({ def }) => declared(def.extension, extensions))
        .sort((a, b) => (a.def.order ?? 1000) - (b.def.order ?? 1000))
        .map(({ def }): Tool => ({
          name: def.name,
          description: def.description,
          // A plain JSON Schema object (TypeBox values carry symbols that must not reach the wire).
          inputSchema: JSON.parse(JSON.stringify(def.inputSchema)) as Tool['inputSchema'],
          ...(def.annotations !== undefined && { annotations: def.annotations }),
          ...(def._meta !== undefined && { _meta: def._meta })
        }))
      const result = transforms.filter(t => declared(t.extension, extensions)).reduce((list, { transform }) => transform(list), entries)
      // Cache only once sealed: before that, more tools or transforms may still arrive.
      if (sealed) listed.set(key, result)
      return result
    },
    notifyChat (chatId, notification) {
      const sinks = streams.get(chatId)
      if (sinks === undefined) return 0
      for (const sink of sinks) sink(notification)
      return sinks.size
    },
    tool (name, extensions) {
      const tool = tools.get(name)
      return tool !== undefined && declared(tool.def.extension, extensions) ? tool : undefined
    },
    resourceProviders: () => providers,
    extensions: () => extensions,
    async instructions (ctx) {
      for (const { provider } of instructionProviders) {
        try {
          const text = await provider(ctx)
          if (text !== undefined && text !== '') return text
        } catch (err) {
          ctx.log.error({ err }, 'instructions provider failed; trying the next one')
        }
      }
      return undefined
    },
    subscribe (chatId, sink) {
      let sinks = streams.get(chatId)
      if (sinks === undefined) streams.set(chatId, sinks = new Set())
      sinks.add(sink)
      return () => {
        sinks.delete(sink)
        if (sinks.size === 0) streams.delete(chatId)
      }
    },
    seal () { sealed = true }
  }
}

/** Applies defaults and converts numeric strings etc. by schema, then validates. Returns problems or the value. */
export function validateArguments (tool: CompiledTool, raw: Record<string, unknown>): { ok: true, value: Record<string, unknown> } | { ok: false, problems: string[] } {
  const prepared = tool.def.prepare !== undefined ? tool.def.prepare({ ...raw }) : { ...raw }
  const value = Value.Convert(tool.def.inputSchema, Value.Default(tool.def.inputSchema, prepared)) as Record<string, unknown>
  if (tool.validator.Check(value)) return { ok: true, value }
  const problems = tool.validator.Errors(value).slice(0, 10).map(e => {
    const where = e.instancePath === '' ? '' : `${e.instancePath.slice(1).replace(/\//g, '.')}: `
    return `${where}${e.message}`
  })
  return { ok: false, problems: [...new Set(problems)] }
}
