import { isObject } from './json.js'
import { oneLine } from './text.js'

/** Longest action text in a progress message. */
export const ACTION_CHARS = 100

/** Input fields that say what a tool call is about, most telling first. */
const SUBJECT_KEYS = ['command', 'cmd', 'file_path', 'filePath', 'path', 'pattern', 'url', 'query', 'description', 'prompt', 'notebook_path']

/** `Bash: npm test`, `Write: src/app.ts`, `Grep: TODO` … or just the tool's name. */
export function toolAction (name: string, input: unknown): string {
  const tool = oneLine(name, 40)
  if (isObject(input)) {
    for (const key of SUBJECT_KEYS) {
      const v = input[key]
      const subject = typeof v === 'string' ? v : Array.isArray(v) && v.every(x => typeof x === 'string') ? shellJoin(v as string[]) : undefined
      if (subject !== undefined && subject.trim() !== '') return oneLine(`${tool}: ${subject}`, ACTION_CHARS)
    }
  }
  return tool
}

/** `bash -lc 'x'` → `x`: the wrapper CLIs put around commands says nothing. */
export function shellJoin (argv: string[]): string {
  if (argv.length === 3 && /(^|\/)(ba|z)?sh$/.test(argv[0] ?? '') && /^-l?c$/.test(argv[1] ?? '')) return argv[2] ?? ''
  return argv.join(' ')
}

/** `Says: <first line of the text>` for a text block in the middle of a run. */
export function textAction (text: string): string | undefined {
  const first = text.split('\n').find(l => l.trim() !== '')
  return first === undefined ? undefined : oneLine(`Says: ${first}`, ACTION_CHARS)
}
