import Type, { type TObject } from 'typebox'
import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server'
import {
  RESOURCES_DIRECTORY_READ_METHOD, SKILLS_EXTENSION_ID, SKILLS_GET_METHOD, SKILLS_LIST_METHOD, type DirectoryResource, type Skill
} from '@modelcontextprotocol/server/ext/skills'
import type { ExtensionDefinition, ExtensionMethod, McpRequestContext } from '../mcp-transport/types.js'
import { parseSkillUri, type SkillCatalog } from './skill-catalog.js'

/*
 * The MCP skills extension, SEP-2640 (docs/contract.md#skills-extension): `skills/list`, `skills/get` and
 * `resources/directory/read` over the skills offered to the caller, whose files tier-resources serves as
 * skill:// resources. Entries are ordered by URI and paged by position; a request without a chat (strict
 * single-user mode) sees no skills, as it sees no resources.
 */
const PAGE_SIZE = 100
const Cursor = Type.String({ minLength: 1, maxLength: 64 })
const Uri = Type.String({ minLength: 1, maxLength: 4096 })

function page<T> (items: T[], cursor: string | undefined): { items: T[], nextCursor?: string } {
  let start = 0
  if (cursor !== undefined) {
    start = Number(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (!Number.isSafeInteger(start) || start < 0 || start > items.length) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid cursor')
  }
  const end = start + PAGE_SIZE
  return { items: items.slice(start, end), ...(end < items.length && { nextCursor: Buffer.from(String(end)).toString('base64url') }) }
}

/** Keeps the handler's params typed by its schema inside the method record. */
const method = <S extends TObject>(def: ExtensionMethod<S>): ExtensionMethod => def as unknown as ExtensionMethod
const hasChat = (ctx: McpRequestContext): boolean => ctx.resolution.kind === 'chat'
const byUri = (a: { uri: string }, b: { uri: string }): number => a.uri < b.uri ? -1 : a.uri > b.uri ? 1 : 0

export function skillsExtension (catalog: SkillCatalog, onSeen: (ctx: McpRequestContext) => void): ExtensionDefinition {
  const notServed = (uri: string, what: string): Error => new ProtocolError(ProtocolErrorCode.InvalidParams, `${uri.slice(0, 200)} is not ${what} this server serves`)

  return {
    id: SKILLS_EXTENSION_ID,
    settings: { directoryRead: true },
    methods: {
      [SKILLS_LIST_METHOD]: method({
        params: Type.Object({ cursor: Type.Optional(Cursor) }),
        async handler (params, ctx) {
          if (!hasChat(ctx)) return { skills: [] }
          onSeen(ctx)
          const entries: Skill[] = (await catalog.offered(ctx)).flatMap(o => o.manifest === undefined ? [] : [o.manifest.entry]).sort(byUri)
          const { items, nextCursor } = page(entries, params.cursor)
          return { skills: items, ...(nextCursor !== undefined && { nextCursor }) }
        }
      }),

      [SKILLS_GET_METHOD]: method({
        params: Type.Object({ uri: Uri }),
        async handler (params, ctx) {
          const parsed = parseSkillUri(params.uri)
          const manifest = parsed === undefined || !hasChat(ctx) ? undefined : await catalog.manifestOf(parsed, ctx)
          if (manifest === undefined || manifest.entry.uri !== parsed?.canonical) throw notServed(params.uri, 'a skill')
          onSeen(ctx)
          return { skill: manifest.entry }
        }
      }),

      [RESOURCES_DIRECTORY_READ_METHOD]: method({
        params: Type.Object({ uri: Uri, cursor: Type.Optional(Cursor) }),
        async handler (params, ctx) {
          const parsed = parseSkillUri(params.uri)
          const manifest = parsed === undefined || !hasChat(ctx) ? undefined : await catalog.manifestOf(parsed, ctx)
          const children: DirectoryResource[] | undefined = parsed === undefined ? undefined : manifest?.dirs.get(parsed.canonical)
          if (children === undefined) throw notServed(params.uri, 'a directory')
          const { items, nextCursor } = page(children, params.cursor)
          return { resources: items, ...(nextCursor !== undefined && { nextCursor }) }
        }
      })
    }
  }
}
