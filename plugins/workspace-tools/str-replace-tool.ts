import type { ToolDefinition } from '../mcp-transport/types.js'
import { StrReplaceInput } from './schemas.js'
import type { WorkspaceDeps, WorkspaceSettings } from './types.js'
import { errorResult } from '../../core/tool-result.js'
import { inSandbox, textResult } from './prologue.js'
import { outputsRelative, resolveSandboxPath } from './paths.js'
import { checkReplaceArgs, decodeEditable, replaceOnce } from './replace.js'
import { READ_MAX_BYTES } from './view-tool.js'

export function createStrReplaceTool (deps: WorkspaceDeps, settings: WorkspaceSettings): ToolDefinition<typeof StrReplaceInput> {
  return {
    name: 'str_replace',
    order: 40,
    description: 'Edit a UTF-8 text file in the sandbox by replacing one exact piece of text. old_str must match the ' +
      'file character for character, whitespace and indentation included, and must occur exactly once: add a few ' +
      'surrounding lines when it is not unique. An empty or omitted new_str deletes old_str. Emit the arguments in ' +
      'this order: description first, then path and old_str, and new_str last.',
    inputSchema: StrReplaceInput,
    annotations: { title: 'Edit a file', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    handler: async (args, ctx) => {
      const newStr = args.new_str ?? ''
      // docs/contract.md#str_replace: these need no file, so they are answered before Docker is touched.
      const bad = checkReplaceArgs(args.old_str, newStr)
      if (bad !== undefined) return errorResult(bad)
      const resolved = resolveSandboxPath(args.path)
      if ('error' in resolved) return errorResult(resolved.error)
      const { path } = resolved
      return await inSandbox(deps, settings, ctx, async ({ files }) => {
        const opened = await files.open(path, { readBytes: READ_MAX_BYTES })
        if (opened === undefined) return errorResult(`Error: path not found: ${path}`)
        if (opened.kind !== 'file') return errorResult(`Error: cannot edit binary or non-UTF-8 file: ${path} is not a regular file`)
        if (opened.size > READ_MAX_BYTES) {
          return errorResult(`Error: cannot edit ${path}: it is ${opened.size} bytes and str_replace edits files up to 16 MiB; use sed or a script through bash_tool`)
        }
        const text = decodeEditable(opened.content)
        if (text === undefined) return errorResult(`Error: cannot edit binary or non-UTF-8 file: ${path}`)
        const outcome = await replaceOnce(text, args.old_str, newStr, path)
        if (!outcome.ok) return errorResult(outcome.error)
        await files.write(path, Buffer.from(outcome.text, 'utf8'))
        const rel = outputsRelative(path)
        const url = rel === undefined ? '' : `\nPublic URL: ${deps.links.fileUrl(ctx.chatId, rel)}`
        return textResult(`Successfully replaced text in ${path} (at line ${outcome.line}). The edited region now reads:\n${outcome.snippet}${url}`)
      })
    }
  }
}
