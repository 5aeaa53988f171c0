import { ProtocolError, type ReadResourceResult, type Resource } from '@modelcontextprotocol/server'
import { normalizeChatId } from '../../core/chat-id.js'
import { SANDBOX_UPLOADS } from '../../core/chat-paths.js'
import { mimeOf } from '../../core/mime.js'
import { humanSize } from '../../core/sizes.js'
import type { ChatRequestContext, ResourceProvider } from '../mcp-transport/types.js'
import type { UploadService } from '../uploads/types.js'
import { isTextMime } from './mime.js'
import { parseUploadUri, uploadUri } from './uri.js'

/** JSON-RPC "internal error": the contract's answer for a file too large to read this way (docs/contract.md#tier-5-uploads-as-mcp-resources). */
const INTERNAL_ERROR = -32603

/**
 * Tier 5 (docs/contract.md#tier-5-uploads-as-mcp-resources): the uploads of the request's chat, computed from the filesystem on every
 * call (correct after restarts, no global registry). Another chat's URI, a missing file, a symlink or
 * anything unreadable is simply "not ours" (undefined), which the transport answers with -32602 (data.uri)
 * without revealing whether the file exists elsewhere.
 */
export function createUploadResources (uploads: UploadService, opts: { maxReadBytes: number }): ResourceProvider {
  return {
    async list (ctx: ChatRequestContext): Promise<Resource[]> {
      const files = await uploads.files(ctx.chatId)
      files.sort((a, b) => a.relPath < b.relPath ? -1 : a.relPath > b.relPath ? 1 : 0)
      return files.map(f => {
        const mimeType = mimeOf(f.relPath)
        return {
          uri: uploadUri(ctx.chatId, f.relPath),
          name: f.relPath,
          mimeType,
          size: f.size,
          description: `File uploaded by the user, ${humanSize(f.size)}, ${mimeType}; also at ${SANDBOX_UPLOADS}/${f.relPath}`
        }
      })
    },

    async read (uri: string, ctx: ChatRequestContext): Promise<ReadResourceResult['contents'] | undefined> {
      const parsed = parseUploadUri(uri)
      if (parsed === undefined || normalizeChatId(parsed.chat) !== ctx.chatId) return undefined
      let data: Buffer
      try {
        data = await uploads.read(ctx.chatId, parsed.relPath, opts.maxReadBytes)
      } catch (err) {
        const code = (err as { code?: string }).code
        if (code === 'UPLOAD_NOT_FOUND') return undefined
        if (code === 'UPLOAD_READ_TOO_LARGE') {
          throw new ProtocolError(INTERNAL_ERROR, `The file is larger than ${humanSize(opts.maxReadBytes)}, too large for resources/read. ` +
            `Use the view or bash_tool tool on ${SANDBOX_UPLOADS}/${parsed.relPath} instead (e.g. head, grep, or view with view_range).`)
        }
        throw err
      }
      const mimeType = mimeOf(parsed.relPath)
      const canonical = uploadUri(ctx.chatId, parsed.relPath)
      return isTextMime(mimeType)
        ? [{ uri: canonical, mimeType, text: data.toString('utf8') }]
        : [{ uri: canonical, mimeType, blob: data.toString('base64') }]
    }
  }
}
