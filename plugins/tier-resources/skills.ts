import { ProtocolError, ResourceNotFoundError, type ReadResourceResult, type Resource } from '@modelcontextprotocol/server'
import { humanSize } from '../../core/sizes.js'
import type { ChatRequestContext, ResourceProvider } from '../mcp-transport/types.js'
import type { PromptService } from '../prompt-render/types.js'
import { isTextMime } from './mime.js'
import { dirOf, locationOf, parseSkillUri, who, type SkillCatalog } from './skill-catalog.js'
import type { ManifestCache } from './skill-manifest.js'
import type { SkillWatchers } from './skill-watchers.js'

/*
 * Skills as MCP resources (docs/contract.md#skills; beyond the reference): every skill offered to the request's
 * user (the same list as the prompt: user skills, public, examples) as `skill://<category>/<name>/SKILL.md`,
 * named and described by its front matter, as the skills extension asks (docs/contract.md#skills-extension);
 * every other file of a served skill is readable at its URI below the skill, verified against the digest the
 * extension published. The older form `skill://<category>/<name>` still reads the SKILL.md. A skill the user
 * is not offered is "not ours" (undefined → -32602 with data.uri), like another chat's upload.
 */
const INTERNAL_ERROR = -32603
const utf8 = new TextDecoder('utf-8', { fatal: true })
const asText = (bytes: Buffer): string | undefined => { try { return utf8.decode(bytes) } catch { return undefined } }

export interface SkillResourceDeps {
  prompts: PromptService
  catalog: SkillCatalog
  manifests: ManifestCache
  /** Learns which chats of a user look at skills, for notifications/resources/list_changed. */
  watchers?: SkillWatchers
  maxReadBytes: number
}

export function createSkillResources (deps: SkillResourceDeps): ResourceProvider {
  const { prompts, catalog, manifests } = deps
  const seen = (ctx: ChatRequestContext): void => { if (ctx.user.email !== undefined) deps.watchers?.remember(ctx.user.email, ctx.chatId) }
  return {
    async list (ctx): Promise<Resource[]> {
      seen(ctx)
      return (await catalog.offered(ctx)).map(({ skill, manifest }) => {
        const front = manifest?.entry.frontmatter
        return {
          uri: manifest?.entry.uri ?? `skill://${skill.category}/${dirOf(skill)}/SKILL.md`,
          name: front?.name ?? skill.name,
          title: `Skill: ${skill.name} (${skill.category})`,
          mimeType: 'text/markdown',
          description: front?.description ?? skill.description,
          ...(manifest !== undefined && { size: manifest.files.get(manifest.entry.uri)?.size })
        }
      })
    },

    async read (uri, ctx): Promise<ReadResourceResult['contents'] | undefined> {
      const parsed = parseSkillUri(uri)
      if (parsed === undefined) return undefined
      seen(ctx)
      const root = `skill://${parsed.category}/${parsed.name}`
      const manifest = await catalog.manifestOf(parsed, ctx)
      if (manifest === undefined) {
        // Not servable through the extension (or not offered): its SKILL.md alone, as before.
        if (parsed.canonical !== root && parsed.canonical !== `${root}/SKILL.md`) return undefined
        const text = await prompts.readSkill(locationOf(parsed.category, parsed.name), who(ctx))
        return text === undefined ? undefined : [{ uri, mimeType: 'text/markdown', text }]
      }
      const file = manifest.files.get(parsed.canonical === root ? manifest.entry.uri : parsed.canonical)
      if (file === undefined) {
        if (manifest.dirs.has(parsed.canonical)) throw new ResourceNotFoundError(uri, `${uri} is a directory; use resources/directory/read`)
        return undefined
      }
      if (file.size > deps.maxReadBytes) throw new ProtocolError(INTERNAL_ERROR, `The file is larger than ${humanSize(deps.maxReadBytes)}, too large for resources/read.`)
      const bytes = await manifests.read(manifest, file)
      if (bytes === undefined) throw new ProtocolError(INTERNAL_ERROR, `${uri} changed since the skill was listed; list the skills again`)
      const text = isTextMime(file.mimeType) ? asText(bytes) : undefined
      return text !== undefined
        ? [{ uri, mimeType: file.mimeType, text }]
        : [{ uri, mimeType: file.mimeType, blob: bytes.toString('base64') }]
    }
  }
}
