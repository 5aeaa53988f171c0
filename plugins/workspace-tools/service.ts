import type { TObject } from 'typebox'
import type { ToolDefinition } from '../mcp-transport/types.js'
import type { WorkspaceDeps, WorkspaceSettings } from './types.js'
import { createBashTool } from './bash-tool.js'
import { createViewTool } from './view-tool.js'
import { createFileTool } from './create-file-tool.js'
import { createStrReplaceTool } from './str-replace-tool.js'

/** The four built-in workspace tools in tools/list order (bash_tool 10, view 20, create_file 30, str_replace 40). */
export function createWorkspaceTools (deps: WorkspaceDeps, settings: WorkspaceSettings): Array<ToolDefinition<TObject>> {
  return [
    createBashTool(deps, settings),
    createViewTool(deps, settings),
    createFileTool(deps, settings),
    createStrReplaceTool(deps, settings)
  ] as unknown as Array<ToolDefinition<TObject>>
}
