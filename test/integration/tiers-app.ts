/*
 * Shared by the tiers-*.test.ts files: an app with the transport, the renderer, uploads and the six
 * tiers (any one left out), without Docker. Tier 2 writes into a fake of *our* SandboxService
 * (registered as sandbox) that records putFile calls; tiers-readme.test.ts uses real Docker.
 */
import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import Type from 'typebox'
import { chatKey } from '../../core/chat-id.js'
import { entry, type Entry } from '../../core/app.js'
import type { AppConfig } from '../../core/config.js'
import { entries } from '../../fastify.config.js'
import promptRender from '../../plugins/prompt-render/index.js'
import uploads from '../../plugins/uploads/index.js'
import chatStorage from '../../plugins/chat-storage/index.js'
import tierToolDescriptions from '../../plugins/tier-tool-descriptions/index.js'
import tierReadme from '../../plugins/tier-readme/index.js'
import tierStaticInstructions from '../../plugins/tier-static-instructions/index.js'
import tierDynamicInstructions from '../../plugins/tier-dynamic-instructions/index.js'
import tierResources from '../../plugins/tier-resources/index.js'
import tierHttp from '../../plugins/tier-http/index.js'
import type { EnsureHook, SandboxService } from '../../plugins/sandbox/types.js'
import type {} from '../../plugins/mcp-transport/types.js'

export const TIERS = ['tier-tool-descriptions', 'tier-readme', 'tier-static-instructions', 'tier-dynamic-instructions', 'tier-resources', 'tier-http'] as const
export type TierName = typeof TIERS[number]

/** What the fake sandbox saw: files written (`chat:path` → content and options) and touches. */
export interface FakeSandboxLog {
  files: Map<string, { content: string, mode?: number, uid?: number, gid?: number }>
  writes: number
  touched: string[]
}

/** A fake SandboxService: ensure() runs the onEnsure hooks (started=true the first time per chat). */
export function fakeSandbox (log: FakeSandboxLog): FastifyPluginAsync {
  return fp(async fastify => {
    const hooks: EnsureHook[] = []
    const started = new Set<string>()
    const unused = async (): Promise<never> => { throw new Error('not used by the tier tests') }
    const service: SandboxService = {
      async ensure (chatId, opts) {
        const info = { chatId, chatKey: chatKey(chatId), sandboxId: `fake-${chatId}`, name: `fake-${chatId}`, createdAt: new Date(0).toISOString() }
        const first = !started.has(chatId)
        started.add(chatId)
        for (const hook of hooks) await hook(info, { started: first, ...(opts?.user !== undefined && { user: opts.user }) })
        return info
      },
      status: unused,
      exec: unused,
      runCommand: unused,
      async putFile (chatId, path, content, opts) {
        log.writes++
        log.files.set(`${chatId}:${path}`, { content: content.toString(), ...opts })
      },
      lease: () => () => {},
      touch: chatId => { log.touched.push(chatId) },
      stop: unused,
      remove: unused,
      onEnsure: hook => { hooks.push(hook) }
    }
    fastify.decorate('sandbox', service)
  }, { name: 'sandbox' })
}

/** bash_tool and view stand-ins: they ensure the sandbox (as the real tools do) and echo the chat. */
export const fakeTools = fp(async fastify => {
  for (const [name, order] of [['bash_tool', 10], ['view', 20]] as const) {
    fastify.mcp.addTool({
      name,
      order,
      description: `Fake ${name} for the tier tests.`,
      inputSchema: Type.Object({ description: Type.String({ description: 'why' }) }),
      handler: async (_args, ctx) => {
        if (fastify.hasDecorator('sandbox')) await fastify.sandbox.ensure(ctx.chatId, { user: ctx.user })
        return { content: [{ type: 'text', text: `ran in ${ctx.chatId}` }] }
      }
    })
  }
}, { name: 'fake-tools', dependencies: ['mcp-transport'] })

export interface TiersManifestOptions {
  without?: TierName
  sandboxLog?: FakeSandboxLog
  readmeCheckIntervalMs?: number
}

export function newSandboxLog (): FakeSandboxLog {
  return { files: new Map(), writes: 0, touched: [] }
}

/** The manifest of fastify.config.ts for these plugins, minus `without`. */
export function tiersManifest (opts: TiersManifestOptions = {}): (config: AppConfig) => Entry[] {
  return config => {
    const tiers: Record<TierName, Entry> = {
      'tier-tool-descriptions': entry(tierToolDescriptions, {}),
      'tier-readme': entry(tierReadme, { checkIntervalMs: opts.readmeCheckIntervalMs ?? 60000 }),
      'tier-static-instructions': entry(tierStaticInstructions, {}),
      'tier-dynamic-instructions': entry(tierDynamicInstructions, {}),
      'tier-resources': entry(tierResources, { maxReadBytes: config.RESOURCE_READ_MAX_BYTES }),
      'tier-http': entry(tierHttp, { singleUserMode: config.singleUserMode })
    }
    return [
      ...entries(config, ['mcp-transport', 'capabilities']),
      entry(fakeSandbox(opts.sandboxLog ?? newSandboxLog()), {}),
      entry(fakeTools, {}),
      entry(promptRender, { singleUserMode: config.singleUserMode, commandTimeoutSeconds: config.COMMAND_TIMEOUT }),
      entry(chatStorage, { dataDir: config.DATA_DIR }),
      entry(uploads, { maxBytes: config.UPLOAD_MAX_BYTES }),
      ...TIERS.filter(name => name !== opts.without).map(name => tiers[name])
    ]
  }
}

/** Uploads one file over HTTP (multipart field `file`); returns the status. */
export async function uploadFile (url: string, chat: string, path: string, content: Buffer | string, headers: Record<string, string> = {}): Promise<number> {
  const fd = new FormData()
  fd.append('file', new Blob([content]), 'f')
  const res = await fetch(`${url}/api/uploads/${chat}/${path}`, { method: 'POST', body: fd, headers })
  await res.arrayBuffer()
  return res.status
}
