import Type, { type Static } from 'typebox'

/** Options of the workspace-tools plugin; every value comes from the environment (core/config.ts). */
export const WorkspaceToolsOptions = Type.Object({
  commandTimeoutS: Type.Integer({ minimum: 1, description: 'COMMAND_TIMEOUT: bash_tool timeout, also the exec bound of view, create_file, str_replace.' }),
  createTimeoutS: Type.Integer({ minimum: 1, description: 'CONTAINER_CREATE_TIMEOUT: how long a call waits for its sandbox.' }),
  maxOutputChars: Type.Integer({ minimum: 1000, description: 'MAX_OUTPUT_CHARS: output cap (half head, half tail).' }),
  progressIntervalS: Type.Integer({ minimum: 1, description: 'PROGRESS_INTERVAL_SECONDS: interval of bash_tool progress notifications.' })
})
export type WorkspaceToolsOptions = Static<typeof WorkspaceToolsOptions>

const description = (what: string) => Type.String({ description: what })

/** docs/contract.md#input-schemas, property order as listed there. */
export const BashToolInput = Type.Object({
  command: Type.String({ description: 'The bash command or script to run (bash -c; multi-line scripts are fine).' }),
  description: description('Why you are running this command, in a few words; shown to the user while it runs.')
})
export type BashToolInput = Static<typeof BashToolInput>

export const ViewInput = Type.Object({
  description: description('Why you are looking at this, in a few words.'),
  path: Type.String({ description: 'Absolute path, or a path relative to /home/assistant.' }),
  view_range: Type.Optional(Type.Union([
    Type.Array(Type.Integer(), { minItems: 2, maxItems: 2 }),
    Type.Null()
  ], {
    default: null,
    description: 'Optional [start, end] line range of a text file, 1-based and inclusive; end -1 means to the end of the file. ' +
      'Lines keep their real numbers. Omit or null for the whole file.'
  }))
})
export type ViewInput = Static<typeof ViewInput>

export const CreateFileInput = Type.Object({
  description: description('Why you are creating this file, in a few words. Write this argument first.'),
  file_text: Type.String({ description: 'The complete content of the file, written exactly as given (UTF-8, no newline added). Write this argument last.' }),
  path: Type.String({ description: 'Absolute path, or a path relative to /home/assistant. Missing parent directories are created.' })
})
export type CreateFileInput = Static<typeof CreateFileInput>

export const StrReplaceInput = Type.Object({
  description: description('Why you are making this edit, in a few words. Write this argument first.'),
  old_str: Type.String({ description: 'The exact text to replace; it must occur exactly once in the file, whitespace and indentation included.' }),
  path: Type.String({ description: 'Absolute path, or a path relative to /home/assistant, of an existing UTF-8 text file.' }),
  new_str: Type.Optional(Type.String({ default: '', description: 'The replacement text; empty or omitted deletes old_str. Write this argument last.' }))
})
export type StrReplaceInput = Static<typeof StrReplaceInput>
