import type { CallToolResult } from '@modelcontextprotocol/server'
import type { ToolDefinition } from '../mcp-transport/types.js'
import type { LinkService } from '../capabilities/types.js'
import { ViewInput } from './schemas.js'
import type { WorkspaceDeps, WorkspaceSettings } from './types.js'
import { errorResult } from '../../core/tool-result.js'
import { inSandbox, textResult } from './prologue.js'
import type { FileKind, Opened, SandboxFiles } from './sandbox-files.js'
import { outputsRelative, resolveSandboxPath } from './paths.js'
import { binaryFileError, hasBinaryExtension, hasImageMagic, isImagePath, knownBinaryHint, looksBinary } from './file-kinds.js'
import { IMAGE_MAX_BYTES, RESIZE_HINT, imageErrorText, parseImageReport } from './image-script.js'
import { formatListing, parseListing } from './listing.js'
import { checkRange, rangeBeyondEnd, renderNumbered, textBlock, viewText, type ViewRange } from './view-text.js'
import { compactSize } from '../../core/sizes.js'
import { yieldToLoop } from './text-scan.js'

/** The most of a file the server ever holds (docs/contract.md#view). */
export const READ_MAX_BYTES = 16 * 1024 * 1024
/** Larger files are shown from separate head and tail reads. */
const PART_BYTES = 256 * 1024

const SPECIAL: Partial<Record<FileKind, string>> = { fifo: 'a named pipe (FIFO)', socket: 'a socket', char: 'a character device', block: 'a block device', other: 'not a regular file' }
const utf8 = new TextDecoder('utf-8')

/** A view_range string longer than this is no pair of line numbers; it is not parsed (deep JSON nesting parses slowly). */
const MAX_RANGE_STRING = 200

/** view_range given as a JSON string ("[1,20]", "null") or with numeric-string items becomes a real array. */
export function prepareViewArgs (args: Record<string, unknown>): Record<string, unknown> {
  let range = args.view_range
  if (typeof range === 'string') {
    const trimmed = range.trim()
    if (trimmed === '' || trimmed === 'null') range = null
    else if (trimmed.length <= MAX_RANGE_STRING) {
      try { range = JSON.parse(trimmed) } catch { /* left as is: validation reports it */ }
    }
  }
  if (Array.isArray(range)) range = range.map(v => typeof v === 'string' && /^\s*-?\d+\s*$/.test(v) ? Number(v) : v)
  return { ...args, view_range: range }
}

interface ViewCall { files: SandboxFiles, links: LinkService, chatId: string, maxChars: number }

async function viewImage (path: string, size: number, c: ViewCall): Promise<CallToolResult> {
  if (size > IMAGE_MAX_BYTES) {
    return errorResult(`Error: image ${path} is too large to view (${compactSize(size)}; the limit is 50 MiB). ${RESIZE_HINT}`)
  }
  const result = await c.files.convertImage(path)
  const report = parseImageReport(result.stderr.toString('utf8'))
  if (result.exitCode !== 0 || report === undefined || 'error' in report || result.stdout.length === 0) {
    return errorResult(imageErrorText(path, report !== undefined && 'error' in report ? report : undefined, size))
  }
  const rel = outputsRelative(path)
  const url = rel === undefined ? '' : `\nPublic URL: ${c.links.fileUrl(c.chatId, rel)}`
  const text = `Image: ${path} (original ${report.width}x${report.height} px, delivered as ${report.outWidth}x${report.outHeight} px JPEG)${url}`
  return { content: [{ type: 'text', text }, { type: 'image', mimeType: 'image/jpeg', data: result.stdout.toString('base64') }] }
}

/** Files above 16 MiB: a range via sed, or the first and last lines from separate reads with real numbers. */
async function viewLargeText (path: string, size: number, headBytes: Buffer, range: ViewRange | null, c: ViewCall): Promise<CallToolResult> {
  const newlines = await c.files.countNewlines(path)
  const lastByte = await c.files.readTail(path, 1)
  const lineCount = newlines + (lastByte.length === 1 && lastByte[0] !== 0x0a ? 1 : 0)
  const facts = { bytes: size, lineCount }
  if (range !== null) {
    const [start, end] = range
    if (start > lineCount) return errorResult(rangeBeyondEnd(range, lineCount))
    const stop = end === -1 ? lineCount : Math.min(end, lineCount)
    const lines = await textBlock(utf8.decode(await c.files.readLines(path, start, stop, READ_MAX_BYTES)), start)
    return textResult(await renderNumbered(lines, facts, c.maxChars))
  }
  const head = await textBlock(utf8.decode(headBytes), 1)
  const tailText = utf8.decode(await c.files.readTail(path, PART_BYTES))
  // The tail read starts inside a line: drop that partial line.
  const tail = await textBlock(tailText.slice(tailText.indexOf('\n') + 1), 1)
  return textResult(await renderNumbered(head, facts, c.maxChars, { ...tail, first: lineCount - tail.count + 1 }))
}

/** How much view reads in the first exec: nothing for files it will not show as text. */
function readPlan (path: string): { readBytes: number, partBytes: number } {
  if (isImagePath(path) || knownBinaryHint(path) !== undefined || hasBinaryExtension(path)) return { readBytes: 0, partBytes: 0 }
  return { readBytes: READ_MAX_BYTES, partBytes: PART_BYTES }
}

async function viewFile (path: string, opened: Opened, range: ViewRange | null, c: ViewCall): Promise<CallToolResult> {
  const { size, content } = opened
  if (isImagePath(path)) return await viewImage(path, size, c)
  const hint = knownBinaryHint(path)
  if (hint !== undefined) return errorResult(hint)
  if (hasBinaryExtension(path)) return errorResult(binaryFileError(path, size))
  if (content.length === 0) return textResult('[Empty file]')
  if (hasImageMagic(content)) return await viewImage(path, size, c)
  if (looksBinary(content)) return errorResult(binaryFileError(path, size))
  if (size > READ_MAX_BYTES) return await viewLargeText(path, size, content, range, c)
  const view = await viewText(utf8.decode(content), content.length, range, c.maxChars)
  return 'error' in view ? errorResult(view.error) : textResult(view.text)
}

export function createViewTool (deps: WorkspaceDeps, settings: WorkspaceSettings): ToolDefinition<typeof ViewInput> {
  return {
    name: 'view',
    order: 20,
    description: 'Look at a file or directory in the sandbox. Text files come back with line numbers (like cat -n); ' +
      'pass view_range to read part of a long file, and note that output over ' +
      `${settings.maxOutputChars} characters keeps only its beginning and end. Directories are listed two levels deep. ` +
      'Images (PNG, JPEG, GIF, WebP, BMP) are returned as pictures you can see. Office documents, PDFs and archives ' +
      'are not displayed; the error names the skill or command to use instead.',
    inputSchema: ViewInput,
    annotations: { title: 'View a file or directory', readOnlyHint: true, openWorldHint: false },
    prepare: prepareViewArgs,
    handler: async (args, ctx) => {
      const resolved = resolveSandboxPath(args.path)
      if ('error' in resolved) return errorResult(resolved.error)
      const range = (args.view_range ?? null) as ViewRange | null
      const bad = range === null ? undefined : checkRange(range)
      if (bad !== undefined) return errorResult(bad)
      const { path } = resolved
      return await inSandbox(deps, settings, ctx, async ({ files }) => {
        const opened = await files.open(path, { ...readPlan(path), list: true })
        if (opened === undefined) return errorResult(`Error: path not found: ${path}`)
        const call: ViewCall = { files, links: deps.links, chatId: ctx.chatId, maxChars: settings.maxOutputChars }
        if (opened.listing !== undefined) {
          const entries = parseListing(opened.listing.out)
          await yieldToLoop() // up to 8 MiB of records: parsing and ordering are two bounded pieces of work
          return textResult(formatListing(path, entries, opened.listing.incomplete))
        }
        if (opened.kind === 'file') return await viewFile(path, opened, range, call)
        return errorResult(`Error: cannot view ${path}: it is ${SPECIAL[opened.kind] ?? 'not a regular file'}; only regular files and directories can be viewed`)
      })
    }
  }
}
