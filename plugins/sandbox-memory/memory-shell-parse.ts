/*
 * The in-memory engine's shell language (memory-shell.ts runs it): the POSIX subset the sandbox
 * core and its tests send. Lists joined by `;`, newlines, `&&`, `||` and `&` (a background job),
 * brace groups, simple commands with assignments (`NAME=value`), single and double quotes, backslash
 * escapes, `$NAME`, `${NAME}`, `${NAME:+word}`, `$?`, `$1`…, `$(command)`, and the redirections `>`,
 * `>>`, `<`, `2>`, `>&2`, `2>&1`. No pipes, loops or functions: a script that uses them is refused
 * (status 2) rather than run differently.
 */

export type Part = { t: 'lit', v: string } | { t: 'var', name: string, alt?: string } | { t: 'cmd', script: string }
export type Word = Part[]

export interface Redirect { fd: 0 | 1 | 2, op: '>' | '>>' | '<' | '>&', target: Word }

/** A simple command (`NAME=value` words before the first other word are assignments) or a brace group. */
export interface Command { words: Word[], redirects: Redirect[], group?: Step[] }

/** One command with what joins it to the previous one, and whether it runs in the background. */
export interface Step { join: ';' | '&&' | '||', command: Command, background: boolean }

export class ShellSyntaxError extends Error {}

const SPECIAL = new Set([';', '&', '|', '<', '>', '\n', '(', ')'])

/** The end (exclusive) of a `$(…)` that starts at `i` (just after `$(`), counting nested parentheses and quotes. */
function substitutionEnd (s: string, i: number): number {
  let depth = 1
  let quote = ''
  for (let j = i; j < s.length; j++) {
    const c = s[j]
    if (quote !== '') { if (c === quote) quote = ''; else if (c === '\\' && quote === '"') j++; continue }
    if (c === '\'' || c === '"') quote = c
    else if (c === '\\') j++
    else if (c === '(') depth++
    else if (c === ')' && --depth === 0) return j
  }
  throw new ShellSyntaxError('unterminated $(')
}

/** Reads a `$…` expansion at `i` (at the `$`); answers the part and the index after it. */
function dollar (s: string, i: number): [Part, number] {
  const next = s[i + 1] ?? ''
  if (next === '(') {
    const end = substitutionEnd(s, i + 2)
    return [{ t: 'cmd', script: s.slice(i + 2, end) }, end + 1]
  }
  if (next === '{') {
    const end = s.indexOf('}', i)
    if (end === -1) throw new ShellSyntaxError('unterminated ${')
    const m = /^([A-Za-z_][A-Za-z0-9_]*|\d+|\?)(?::\+(.*))?$/s.exec(s.slice(i + 2, end))
    if (m === null) throw new ShellSyntaxError(`unsupported expansion \${${s.slice(i + 2, end)}}`)
    return [m[2] === undefined ? { t: 'var', name: m[1] ?? '' } : { t: 'var', name: m[1] ?? '', alt: m[2] }, end + 1]
  }
  if (next === '?' || /\d/.test(next)) return [{ t: 'var', name: next }, i + 2]
  const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(s.slice(i + 1))
  if (m === null) return [{ t: 'lit', v: '$' }, i + 1]
  return [{ t: 'var', name: m[0] }, i + 1 + m[0].length]
}

type Token = { k: 'word', w: Word } | { k: 'op', v: string }

export function tokenize (s: string): Token[] {
  const out: Token[] = []
  let i = 0
  while (i < s.length) {
    const c = s[i] ?? ''
    if (c === ' ' || c === '\t') { i++; continue }
    if (c === '#') { while (i < s.length && s[i] !== '\n') i++; continue }
    if (c === '\\' && s[i + 1] === '\n') { i += 2; continue }
    // `2>…`: a digit right before a redirection names the descriptor.
    const fd = /^[012](>>|>&|>|<)/.exec(s.slice(i, i + 3))
    if (fd !== null) { out.push({ k: 'op', v: fd[0] }); i += fd[0].length; continue }
    const two = s.slice(i, i + 2)
    if (['&&', '||', '>>', '>&'].includes(two)) { out.push({ k: 'op', v: two }); i += 2; continue }
    if (SPECIAL.has(c)) { out.push({ k: 'op', v: c }); i++; continue }
    const w: Word = []
    const lit = (v: string): void => {
      const last = w[w.length - 1]
      if (last?.t === 'lit') last.v += v
      else w.push({ t: 'lit', v })
    }
    while (i < s.length && !SPECIAL.has(s[i] ?? '') && s[i] !== ' ' && s[i] !== '\t') {
      const ch = s[i] ?? ''
      if (ch === '\\') { lit(s[i + 1] ?? ''); i += 2 } else if (ch === '\'') {
        const end = s.indexOf('\'', i + 1)
        if (end === -1) throw new ShellSyntaxError('unterminated quote')
        lit(s.slice(i + 1, end))
        i = end + 1
      } else if (ch === '"') {
        i++
        lit('')
        while (i < s.length && s[i] !== '"') {
          const d = s[i] ?? ''
          if (d === '\\' && /["\\$`\n]/.test(s[i + 1] ?? '')) { lit(s[i + 1] ?? ''); i += 2 } else if (d === '$') {
            const [part, next] = dollar(s, i)
            w.push(part)
            i = next
          } else { lit(d); i++ }
        }
        if (s[i] !== '"') throw new ShellSyntaxError('unterminated quote')
        i++
      } else if (ch === '$') {
        const [part, next] = dollar(s, i)
        w.push(part)
        i = next
      } else { lit(ch); i++ }
    }
    out.push({ k: 'word', w })
  }
  return out
}

const isWord = (tok: Token | undefined, v: string): boolean => tok?.k === 'word' && tok.w.length === 1 && tok.w[0]?.t === 'lit' && tok.w[0].v === v

/** Parses a script into steps. */
export function parse (script: string): Step[] {
  const tokens = tokenize(script)
  const [steps, end] = list(tokens, 0, false)
  if (end < tokens.length) throw new ShellSyntaxError('unexpected }')
  return steps
}

/** Steps from `i` up to the end, or up to a `}` at a command's start when `inGroup`. */
function list (tokens: Token[], start: number, inGroup: boolean): [Step[], number] {
  const steps: Step[] = []
  let join: Step['join'] = ';'
  let cmd: Command = { words: [], redirects: [] }
  const flush = (background: boolean, next: Step['join']): void => {
    if (cmd.words.length > 0 || cmd.redirects.length > 0 || cmd.group !== undefined) steps.push({ join, command: cmd, background })
    else if (next !== ';') throw new ShellSyntaxError(`${next} without a command`)
    cmd = { words: [], redirects: [] }
    join = next
  }
  const redirect = (fd: 0 | 1 | 2, op: string, target: Token | undefined): void => {
    if (target?.k !== 'word') throw new ShellSyntaxError(`${op} without a target`)
    cmd.redirects.push({ fd, op: op as Redirect['op'], target: target.w })
  }
  let i = start
  for (; i < tokens.length; i++) {
    const tok = tokens[i] as Token
    const atStart = cmd.words.length === 0 && cmd.group === undefined
    if (atStart && inGroup && isWord(tok, '}')) break
    if (atStart && isWord(tok, '{')) {
      const [group, end] = list(tokens, i + 1, true)
      if (!isWord(tokens[end], '}')) throw new ShellSyntaxError('unterminated {')
      cmd.group = group
      i = end
      continue
    }
    if (tok.k === 'word') {
      if (cmd.group !== undefined) throw new ShellSyntaxError('words after }')
      cmd.words.push(tok.w)
      continue
    }
    const fd = /^([012])(.+)$/.exec(tok.v)
    if (fd !== null) { redirect(Number(fd[1]) as 0 | 1 | 2, fd[2] ?? '', tokens[++i]); continue }
    if (tok.v === '>' || tok.v === '>>' || tok.v === '>&') { redirect(1, tok.v, tokens[++i]); continue }
    if (tok.v === '<') { redirect(0, '<', tokens[++i]); continue }
    if (tok.v === ';' || tok.v === '\n') { flush(false, ';'); continue }
    if (tok.v === '&') { flush(true, ';'); continue }
    if (tok.v === '&&' || tok.v === '||') { flush(false, tok.v); continue }
    throw new ShellSyntaxError(`unsupported: ${tok.v === '|' ? 'pipes' : tok.v}`)
  }
  flush(false, ';')
  if (join !== ';') throw new ShellSyntaxError(`script ends with ${join}`)
  return [steps, i]
}
