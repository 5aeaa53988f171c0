/*
 * Requests a program in the sandbox makes of the server through its own bash_tool command
 * (docs/contract.md#command-requests): one output line `::cubicle:: <kind> <token> <text>`, where token is
 * the CUBICLE_REQUEST_TOKEN of that one call (random, 128 bits, only in that command's environment). A
 * page the browser printed, a file that was cat'ed or another command cannot know it, so only a program
 * the command itself ran can ask; the model could ask anyway by running that program. Lines with this
 * call's token are removed from the output; others are left as the text they are.
 */
import { randomBytes } from 'node:crypto'

export const REQUEST_TOKEN_ENV = 'CUBICLE_REQUEST_TOKEN'
const PREFIX = '::cubicle:: '
const KIND = /^[a-z][a-z0-9-]{0,31}$/
const MAX_TEXT = 1000

export interface CommandRequest { kind: string, text: string }

export const newRequestToken = (): string => randomBytes(16).toString('hex')

/** The output without this call's request lines, and the first request among them. */
export function takeRequests (output: string, token: string): { output: string, request?: CommandRequest } {
  if (!output.includes(PREFIX)) return { output }
  let request: CommandRequest | undefined
  const kept: string[] = []
  for (const line of output.split('\n')) {
    if (line.startsWith(PREFIX)) {
      const rest = line.slice(PREFIX.length)
      const kindEnd = rest.indexOf(' ')
      const kind = kindEnd === -1 ? '' : rest.slice(0, kindEnd)
      const afterKind = rest.slice(kindEnd + 1)
      if (KIND.test(kind) && afterKind.startsWith(token) && (afterKind.length === token.length || afterKind[token.length] === ' ')) {
        request ??= { kind, text: afterKind.slice(token.length + 1).replace(/\r$/, '').slice(0, MAX_TEXT) }
        continue
      }
    }
    kept.push(line)
  }
  return { output: kept.join('\n'), ...(request !== undefined && { request }) }
}
