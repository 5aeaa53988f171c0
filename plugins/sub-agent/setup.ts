import tar from 'tar-stream'

/*
 * Preparing a run inside the sandbox with one exec as the sandbox user: check the working directory
 * and the CLI, create the run directory (docs/contract.md#sub-agent-execution: plan, argv, stdin and markers per run, so
 * concurrent runs never clobber each other), unpack the run's files from a tar stream on stdin (no
 * shell interpolation of any value), and enable MCP servers for claude (docs/contract.md#sub-agent-mcp-servers). Everything runs as
 * `assistant`, so a link the agent planted can only ever lead to its own files.
 */

export const RUNS_DIR = '/home/assistant/.sub_agent'
/** Run directories older than this many days are removed when a new run starts. */
const KEEP_RUN_DAYS = 7

export interface SandboxFile { path: string, content: string, mode?: number }

/** A tar stream of absolute paths (stored relative to /) for `tar -x -C /`. */
export async function tarOf (files: readonly SandboxFile[]): Promise<Buffer> {
  const pack = tar.pack()
  const chunks: Buffer[] = []
  const done = new Promise<Buffer>((resolve, reject) => {
    pack.on('data', (c: unknown) => { chunks.push(c as Buffer) })
    pack.on('end', () => resolve(Buffer.concat(chunks)))
    pack.on('error', reject)
  })
  for (const f of files) {
    if (!f.path.startsWith('/') || f.path.split('/').some(seg => seg === '..')) throw new TypeError(`not an absolute path: ${f.path}`)
    const body = Buffer.from(f.content, 'utf8')
    await new Promise<void>((resolve, reject) => {
      pack.entry({ name: f.path.slice(1), size: body.length, mode: f.mode ?? 0o600, mtime: new Date(), type: 'file' }, body, err => { if (err != null) reject(err); else resolve() })
    })
  }
  pack.finalize()
  return await done
}

/**
 * $1 working directory, $2 CLI binary, $3 JSON array of MCP server names to enable ('' = none).
 * Prints one status word: ok | cwd-missing | cwd-denied | cli-missing | setup-failed <detail>.
 */
export const SETUP_SCRIPT = `
umask 077
cwd=$1; bin=$2; mcp=$3
case $cwd in /*) ;; *) echo cwd-missing; exit 0 ;; esac
[ -d "$cwd" ] || { echo cwd-missing; exit 0; }
cd -- "$cwd" 2>/dev/null || { echo cwd-denied; exit 0; }
command -v -- "$bin" >/dev/null 2>&1 || { echo cli-missing; exit 0; }
mkdir -p "${RUNS_DIR}" 2>/dev/null || { echo "setup-failed cannot create ${RUNS_DIR}"; exit 0; }
find "${RUNS_DIR}" -mindepth 1 -maxdepth 1 -type d -name 'r-*' -mtime +${KEEP_RUN_DAYS} -exec rm -rf -- {} + 2>/dev/null
err=$(tar -x -C / --no-overwrite-dir -f - 2>&1) || { printf 'setup-failed %s\\n' "$err" | head -c 500; exit 0; }
if [ -n "$mcp" ]; then
  f=$HOME/.claude/settings.local.json
  mkdir -p "$HOME/.claude"
  if [ ! -s "$f" ]; then
    printf '{"enabledMcpjsonServers":%s}\\n' "$mcp" > "$f"
  elif command -v jq >/dev/null 2>&1 && jq -e 'type == "object"' "$f" >/dev/null 2>&1; then
    jq --argjson n "$mcp" '.enabledMcpjsonServers = (((.enabledMcpjsonServers // []) + $n) | unique)' "$f" > "$f.cubicle.$$" && mv -f -- "$f.cubicle.$$" "$f"
  fi
fi
echo ok
`

export type SetupStatus = 'ok' | 'cwd-missing' | 'cwd-denied' | 'cli-missing' | 'setup-failed'

export function setupArgv (cwd: string, bin: string, mcpNames: readonly string[]): string[] {
  return ['/bin/sh', '-c', SETUP_SCRIPT, 'cubicle-sub-agent-setup', cwd, bin, mcpNames.length > 0 ? JSON.stringify(mcpNames) : '']
}

/** The status word (and detail) from the script's stdout; anything unexpected is a failure. */
export function parseSetup (stdout: string): { status: SetupStatus, detail: string } {
  const line = stdout.trim().split('\n').pop() ?? ''
  const [word = '', ...rest] = line.split(' ')
  const known: SetupStatus[] = ['ok', 'cwd-missing', 'cwd-denied', 'cli-missing', 'setup-failed']
  const status = (known as string[]).includes(word) ? word as SetupStatus : 'setup-failed'
  return { status, detail: rest.join(' ').slice(0, 300) }
}

/**
 * The command the run executes (bash, via the sandbox's runCommand): a constant text that reads argv
 * from the run directory (NUL-separated), feeds the prepared stdin and sends the CLI's stderr to a
 * file, so stdout carries only the CLI's event stream. `exec` makes the CLI bash's successor: its exit
 * status is the run's, and the sandbox's kill path reaches it through the exec marker.
 */
export const RUN_SCRIPT = 'cd -- "$CUBICLE_SUB_AGENT_CWD" || exit 97\n' +
  'mapfile -d \'\' -t argv < "$CUBICLE_SUB_AGENT_RUN/argv" || exit 97\n' +
  'exec "${argv[@]}" < "$CUBICLE_SUB_AGENT_RUN/stdin" 2> "$CUBICLE_SUB_AGENT_RUN/stderr.log"\n'

/** argv as the NUL-terminated list RUN_SCRIPT reads. */
export const argvFile = (argv: readonly string[]): string => argv.map(a => a.replace(/\0/g, '') + '\0').join('')

/**
 * After a run: the end of the CLI's stderr and, for codex, its last-message file (the text fallback
 * of docs/contract.md#sub-agent-result), separated by a per-call nonce so file content cannot pose as the separator.
 */
export const COLLECT_SCRIPT = `
run=$1; nonce=$2
tail -c 4096 -- "$run/stderr.log" 2>/dev/null
printf '\\n%s\\n' "$nonce"
[ -f "$run/last_message.txt" ] && head -c 262144 -- "$run/last_message.txt" 2>/dev/null
exit 0
`
