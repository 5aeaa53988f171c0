import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { WorkspaceToolsOptions } from './schemas.js'
import { createWorkspaceTools } from './service.js'
import type { CommandRequestHandler, ResultNote, ResultNoteOptions, WorkspaceToolsService } from './types.js'

/** bash_tool, view, create_file and str_replace (docs/contract.md#common-tool-rules), run in the chat's sandbox. */
const workspaceTools: FastifyPluginAsync<WorkspaceToolsOptions> = async (fastify, raw) => {
  const opts = parseOptions(WorkspaceToolsOptions, raw, 'workspace-tools')
  const notes: ResultNote[] = []
  const noteNeeds: ResultNoteOptions = {}
  const requests = new Map<string, CommandRequestHandler>()
  const deps = {
    sandbox: fastify.sandbox,
    links: fastify.links,
    storage: fastify.chatStorage,
    notes,
    noteNeeds,
    requests
  }
  for (const tool of createWorkspaceTools(deps, opts)) fastify.mcp.addTool(tool)
  fastify.decorate('workspaceTools', {
    addResultNote: (note, needs) => {
      notes.push(note)
      if (needs?.listening !== undefined) noteNeeds.listening = Math.max(noteNeeds.listening ?? 0, needs.listening)
    },
    addCommandRequest: (kind, handler) => {
      if (requests.has(kind)) throw new TypeError(`a handler for command requests of kind '${kind}' is already registered`)
      requests.set(kind, handler)
    }
  } satisfies WorkspaceToolsService)
}

export default fp(workspaceTools, {
  name: 'workspace-tools',
  fastify: '5.x',
  dependencies: ['mcp-transport', 'sandbox', 'capabilities', 'chat-storage'],
  decorators: { fastify: ['mcp', 'sandbox', 'links', 'chatStorage'] }
})
