/*
 * How a process is started through pods/exec (docs/engine.md#kubernetes). The exec API takes only a
 * command line, which travels in the request URL (and so into the API server's audit log) and runs as
 * the container's user in its working directory. So every exec runs the same fixed wrapper script, and
 * what a caller asked for (environment, working directory, argv, whether it wants stdin) comes first on
 * the process's stdin as a preamble of lines; nothing a user typed or a credential reaches the URL.
 * A TTY exec cannot take a preamble on its terminal (the line discipline echoes it): the engine writes
 * it to a 0600 file in /tmp through a plain exec first, and the TTY exec reads and removes that file.
 *
 * Preamble lines: the count of variables, then NAME and value for each; the working directory; the
 * count of arguments and each; `1` to keep stdin for the process, `0` for /dev/null. Values are bytes
 * 0x20–0x7e except `\` as they are, every other byte as `\0ooo` (printf %b), so no line breaks.
 */

/** $1: `-` (the preamble is on stdin) or the path of a preamble file (read, then removed). */
export const WRAPPER = [
  'if [ "$1" = - ]; then exec 3<&0; else exec 3<"$1" || exit 126; rm -f -- "$1"; fi',
  '_cu_d () { IFS= read -r _cu_v <&3 || exit 126; case $_cu_v in *\\\\*) _cu_v=$(printf "%bx" "$_cu_v"); _cu_v=${_cu_v%x};; esac; }',
  'IFS= read -r _cu_n <&3 || exit 126',
  'while [ "$_cu_n" -gt 0 ]; do IFS= read -r _cu_k <&3 || exit 126; _cu_d; export "$_cu_k=$_cu_v"; _cu_n=$((_cu_n - 1)); done',
  '_cu_d; cd -- "$_cu_v" || exit 126',
  'IFS= read -r _cu_n <&3 || exit 126',
  'set --',
  'while [ "$_cu_n" -gt 0 ]; do _cu_d; set -- "$@" "$_cu_v"; _cu_n=$((_cu_n - 1)); done',
  'IFS= read -r _cu_s <&3 || exit 126',
  'exec 3<&-',
  '[ "$_cu_s" = 1 ] || exec </dev/null',
  'unset _cu_k _cu_v _cu_n _cu_s; unset -f _cu_d',
  'exec "$@"'
].join('\n')

/** The exec command line: always the same (the argument is `-` or a preamble file's path). */
export function wrapperCommand (source: string): string[] {
  return ['/bin/sh', '-c', WRAPPER, 'cubicle-exec', source]
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

function encode (text: string): string {
  const bytes = Buffer.from(text, 'utf8')
  let out = ''
  for (const b of bytes) {
    if (b === 0) throw new Error('an argument or environment value contains a NUL byte')
    out += b >= 0x20 && b <= 0x7e && b !== 0x5c ? String.fromCharCode(b) : '\\0' + b.toString(8).padStart(3, '0')
  }
  return out
}

export interface PreambleSpec {
  /** `KEY=value` entries */
  env: string[]
  cwd: string
  argv: string[]
  stdin: boolean
}

export function preamble (p: PreambleSpec): Buffer {
  if (p.argv.length === 0) throw new Error('exec needs a command (argv is empty)')
  const lines: string[] = [String(p.env.length)]
  for (const entry of p.env) {
    const eq = entry.indexOf('=')
    const name = eq < 0 ? entry : entry.slice(0, eq)
    if (!NAME.test(name)) throw new Error(`an environment variable name must match [A-Za-z_][A-Za-z0-9_]*, got "${name.slice(0, 100)}"`)
    lines.push(name, encode(eq < 0 ? '' : entry.slice(eq + 1)))
  }
  lines.push(encode(p.cwd), String(p.argv.length), ...p.argv.map(encode), p.stdin ? '1' : '0')
  return Buffer.from(lines.join('\n') + '\n', 'latin1')
}
