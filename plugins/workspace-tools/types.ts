import type { LinkService } from '../capabilities/types.js'
import type { ListeningSocket, SandboxService } from '../sandbox/types.js'
import type { ChatStorageService } from '../chat-storage/types.js'
import type { ToolCallContext, ToolInputRequired } from '../mcp-transport/types.js'

/** What the four workspace tools need from the rest of the server (decorated services, passed in). */
export interface WorkspaceDeps {
  sandbox: SandboxService
  links: LinkService
  /**
   * The chat's outputs (bind-mounted at /mnt/user-data/outputs), walked by descriptor for the result links,
   * and the change clock that spares a walk before each command (outputs-snapshot.ts).
   */
  storage: Pick<ChatStorageService, 'walk' | 'changeClock'>
  /** Notes other plugins add to bash_tool results (WorkspaceToolsService.addResultNote). */
  notes?: ResultNote[]
  /** What the notes asked to be read with each command's exit (addResultNote's options; filled while plugins load). */
  noteNeeds?: ResultNoteOptions
  /** Handlers of requests programs in the sandbox make through their command's output, by kind. */
  requests?: ReadonlyMap<string, CommandRequestHandler>
}

/**
 * Answers a request a program in the sandbox made through its bash_tool command (docs/contract.md#command-requests),
 * after the command ended: `text` is the program's (untrusted, at most 1,000 characters). The answer is
 * appended to the result for the model. It may take as long as it needs (the call stays open, with progress);
 * it ends when `ctx.signal` aborts. A rejection becomes a short note, never a failed call.
 * On 2026-07-28 (`ctx.inputRound`) it may answer `inputRequired` instead: the call ends asking the client,
 * and the retried call calls the handler again with the same text and `ctx.inputRound.resumed` (its
 * state, the client's answers), without running the command again.
 */
export type CommandRequestHandler = (ctx: ToolCallContext, text: string) => Promise<string | ToolInputRequired>

/**
 * Text another plugin appends to a successful bash_tool result, after the output links (the ports
 * plugin's new listening ports): asked after every command that ran, in registration order; an
 * answer that does not fit the result's limit is left out; one that rejects or takes longer than
 * 3 s is skipped (and logged at debug level by its owner). `facts` holds what the command's exit said
 * that a note asked for (ResultNoteOptions), when the engine could say it.
 */
export type ResultNote = (chatId: string, facts: CommandFacts) => Promise<string | undefined>

/** What a note wants read with the command's exit rather than asked of the sandbox after it. */
export interface ResultNoteOptions {
  /** up to this many of the sandbox's listening TCP sockets (≤ 4096; SandboxService CommandOptions.listening) */
  listening?: number
}

/** What the command's exit said for the notes. */
export interface CommandFacts {
  /** the sandbox's listening TCP sockets right after the command (absent: the engine did not say; ask the sandbox) */
  listening?: readonly ListeningSocket[]
}

/** What workspace-tools offers other plugins. */
export interface WorkspaceToolsService {
  /** Register while plugins load. */
  addResultNote (note: ResultNote, opts?: ResultNoteOptions): void
  /** Register while plugins load; one handler per kind (a second throws). */
  addCommandRequest (kind: string, handler: CommandRequestHandler): void
}

declare module 'fastify' {
  interface FastifyInstance { workspaceTools: WorkspaceToolsService }
}

/** The plugin's options after parseOptions. */
export interface WorkspaceSettings {
  commandTimeoutS: number
  createTimeoutS: number
  maxOutputChars: number
  progressIntervalS: number
}
