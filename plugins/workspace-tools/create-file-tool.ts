import type { ToolDefinition } from '../mcp-transport/types.js'
import { CreateFileInput } from './schemas.js'
import type { WorkspaceDeps, WorkspaceSettings } from './types.js'
import { errorResult } from '../../core/tool-result.js'
import { inSandbox, textResult } from './prologue.js'
import { outputsRelative, resolveSandboxPath } from './paths.js'

export const CREATE_MAX_BYTES = 10 * 1024 * 1024

export function createFileTool (deps: WorkspaceDeps, settings: WorkspaceSettings): ToolDefinition<typeof CreateFileInput> {
  return {
    name: 'create_file',
    order: 30,
    description: 'Create a file in the sandbox, or replace one, with exactly the text given (UTF-8, no newline added); ' +
      'missing parent directories are created. Relative paths are taken from /home/assistant. Save deliverables in ' +
      '/mnt/user-data/outputs: the result then gives the file\'s public link. Emit the arguments in this order: ' +
      'description first, then path, and file_text last.',
    inputSchema: CreateFileInput,
    annotations: { title: 'Create a file', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    handler: async (args, ctx) => {
      const resolved = resolveSandboxPath(args.path)
      if ('error' in resolved) return errorResult(resolved.error)
      const { path } = resolved
      const content = Buffer.from(args.file_text, 'utf8')
      if (content.length > CREATE_MAX_BYTES) {
        return errorResult(`Error: file_text is ${content.length} bytes; create_file writes at most 10 MiB (${CREATE_MAX_BYTES} bytes). ` +
          'Write large files in parts with bash (e.g. append chunks) or generate them with a script.')
      }
      return await inSandbox(deps, settings, ctx, async ({ files }) => {
        const replaced = await files.write(path, content)
        const rel = outputsRelative(path)
        const url = rel === undefined ? '' : `\nPublic URL: ${deps.links.fileUrl(ctx.chatId, rel)}`
        return textResult(`Successfully created ${path} (${content.length} bytes${replaced ? ', replacing the previous file' : ''})${url}`)
      })
    }
  }
}
