/*
 * The text of the per-chat prompt (docs/contract.md#rendered-prompt-content), written for this server. One function builds both
 * the chat render and the legacy template: the template is the same text with `{chat_id}`,
 * `{file_base_url}` and `{archive_url}` left in place for clients that substitute them themselves.
 * Uploaded files are deliberately not listed (tier 5 carries them).
 */
import { SANDBOX_HOME, SANDBOX_OUTPUTS, SANDBOX_SKILLS, SANDBOX_UPLOADS } from '../../core/chat-paths.js'
import type { SubagentCli } from '../../core/config.js'
import type { SkillCategory, SkillEntry } from './types.js'
import { skillsBlock } from './skills.js'

export interface PromptVars {
  chatId: string
  filesBase: string
  archiveUrl: string
  /** Only for a real chat: the preview page with a read-only files token. */
  previewUrl?: string
  /** Only for a real chat with app preview URLs: `<PUBLIC>/apps/<chat>` (docs/features.md#app-preview-urls). */
  appsBase?: string
  email?: string
  skills: SkillEntry[]
  /** Skill categories whose directory exists (only those are named). */
  skillDirs: SkillCategory[]
  /** Skills left out to respect the size cap. */
  omittedSkills: number
  commandTimeoutSeconds: number
  subagentCli: SubagentCli
  networkEnabled: boolean
  /** Names of the tools clients see (tools/list), so the prompt never names a tool that does not exist. */
  tools: string[]
}

const CLI_NAME: Record<SubagentCli, string> = { claude: 'Claude Code', codex: 'OpenAI Codex CLI', opencode: 'opencode' }

const TOOL_ROLE: Record<string, string> = {
  bash_tool: 'run shell commands',
  view: 'read files, list directories, look at images',
  create_file: 'write a whole file',
  str_replace: 'edit a file',
  sub_agent: 'delegate a long coding task'
}
const NUMBER = ['no', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine']

function toolSentence (tools: string[]): string {
  const named = tools.map(t => TOOL_ROLE[t] !== undefined ? `\`${t}\` (${TOOL_ROLE[t]})` : `\`${t}\``)
  const list = named.length > 1 ? `${named.slice(0, -1).join(', ')} and ${named[named.length - 1]}` : (named[0] ?? '')
  return `You work on it through ${NUMBER[tools.length] ?? String(tools.length)} tool${tools.length === 1 ? '' : 's'}: ${list}.`
}

const has = (skills: SkillEntry[], category: SkillCategory, name: string): boolean =>
  skills.some(s => s.category === category && s.location === `${SANDBOX_SKILLS}/${category}/${name}/SKILL.md`)

export function buildPrompt (v: PromptVars): string {
  const skillDirs = v.skillDirs.map(d => `\`${d}\``).join(', ')
  const sharingSkill = has(v.skills, 'public', 'file-sharing') ? ` Details: \`${SANDBOX_SKILLS}/public/file-sharing/SKILL.md\`.` : ''
  const browserSkill = has(v.skills, 'public', 'browser')
    ? [`- Web browser: the \`browser\` command drives a Chromium that the user watches live and can take over in the Browser tab of this chat's preview page. Read \`${SANDBOX_SKILLS}/public/browser/SKILL.md\` before using it; for logins and captchas, run \`browser handoff "<why>"\` (it hands the browser to the user) instead of asking for passwords.`]
    : []
  // Images without the `job` command (built before it) keep the nohup advice.
  const jobSkill = has(v.skills, 'public', 'job')
  const subAgentSkill = has(v.skills, 'public', 'sub-agent') ? ` Read \`${SANDBOX_SKILLS}/public/sub-agent/SKILL.md\` before the first call.` : ''
  const cli = `${CLI_NAME[v.subagentCli]} (\`${v.subagentCli}\`)`
  const lines = [
    `<!-- This is the contents of /home/assistant/README.md, written by the server for chat ${v.chatId}. It is regenerated automatically: read it again whenever you lose track of your environment, and do not edit it. -->`,
    '# Your computer for this chat',
    '',
    `You have a Linux computer (a Docker sandbox) that belongs to this chat alone. ${toolSentence(v.tools)} Everything runs as the unprivileged user \`assistant\`.`,
    '',
    `- \`${SANDBOX_HOME}\` is your workspace and working directory. It persists across turns and sandbox restarts: files left there are still there later.`,
    jobSkill
      ? `- A \`bash_tool\` command may run for ${v.commandTimeoutSeconds} seconds, then it is stopped together with everything it started. Run servers and longer jobs in the background with the \`job\` command: \`job start --name web -- npm run dev\`, then \`job list\` (state, listening ports), \`job logs web\`, \`job stop web\`. Jobs keep running between calls; read \`${SANDBOX_SKILLS}/public/job/SKILL.md\` before the first one.`
      : `- A \`bash_tool\` command may run for ${v.commandTimeoutSeconds} seconds, then it is stopped. Start longer jobs in the background with output redirected (\`nohup cmd > job.log 2>&1 &\`) and check the log in later calls.`,
    '- Commands run without a terminal or stdin: use non-interactive flags (`-y`, `--yes`), no editors or pagers.',
    v.networkEnabled ? '- Outbound network access is available (downloads, package installs into your home).' : '- The sandbox has no network access.',
    ...browserSkill,
    '',
    '## Where files live',
    '',
    `- \`${SANDBOX_UPLOADS}\`: files the user uploaded to this chat (read-only). List them with \`ls -la ${SANDBOX_UPLOADS}\`; copy one into your workspace before changing it.`,
    `- \`${SANDBOX_HOME}\`: your workspace (read-write).`,
    `- \`${SANDBOX_OUTPUTS}\`: deliverables for the user, published over HTTP (read-write). Only files here can reach the user.`,
    ...(skillDirs === '' ? [] : [`- \`${SANDBOX_SKILLS}\`: skills, read-only (${skillDirs}).`]),
    '',
    '## This chat and its links',
    '',
    `- Chat id: \`${v.chatId}\``,
    ...(v.email !== undefined ? [`- User: ${v.email}`] : []),
    `- Files base URL: ${v.filesBase}`,
    `- Everything in outputs as one zip: ${v.archiveUrl}`,
    ...(v.previewUrl !== undefined ? [`- Live preview of outputs: ${v.previewUrl}`] : []),
    '',
    `The user cannot see your home directory. To hand over a file, save it under \`${SANDBOX_OUTPUTS}/\` and link it: files base URL + \`/\` + its path relative to outputs, each segment percent-encoded (space → \`%20\`, \`#\` → \`%23\`, \`?\` → \`%3F\`). Example: \`${SANDBOX_OUTPUTS}/Q3 report.pdf\` → ${v.filesBase}/Q3%20report.pdf . Show images from outputs inline as markdown images, e.g. \`![Chart](${v.filesBase}/chart.png)\`. Copy the base URL exactly; never invent, shorten or guess a link. With several files, also give the zip link.${sharingSkill}`,
    '',
    '## Skills',
    '',
    'Skills are folders of tested instructions and scripts for particular kinds of work. Before you start a task that matches a skill\'s description, read that skill\'s SKILL.md with `view` and follow it.',
    '',
    skillsBlock(v.skills),
    ...(v.omittedSkills > 0 ? [`(${v.omittedSkills} more skills are installed: \`ls ${SANDBOX_SKILLS}/*\`.)`] : []),
    '',
    '## Using the tools well',
    '',
    '- Read files and list directories with `view`; write new files with `create_file`; change existing files with `str_replace`. Use `bash_tool` to run programs, search and move files.',
    '- `str_replace` replaces exactly one occurrence: `old_str` must match the file exactly (whitespace included) and be unique; include more surrounding lines when it is not. `view` the region first.',
    '- Very long output is cut in the middle: you get its beginning and end plus a note saying it was truncated. Read the rest with `head`, `tail`, `sed -n \'100,200p\'`, `grep`, or `view` with `view_range`.',
    '- Exit status 1 of `grep`/`rg` (no match), `find` (some directories unreadable), `diff` (files differ) and `test`/`[` (condition false) is information, not a failure.',
    '- After creating an image (chart, screenshot, rendered page), look at it with `view` before you present it.',
    '- `view` does not show Office/PDF files or archives; it names the skill or command to use instead.',
    '',
    '## Large files',
    '',
    '- Check sizes first (`ls -lh`, `wc -l`, `du -sh`) and never print a large file whole.',
    '- For big tables (CSV, Excel) read the header and a sample (`head -n 20`, pandas `nrows=`), then compute with code.',
    '- Page through long PDFs: `pdfinfo` for the page count, then `pdftotext -f N -l M file.pdf -` a few pages at a time.',
    '',
    ...(v.appsBase !== undefined
      ? ['## Web apps', '', `A server you start here (a web app, dashboard or API listening on \`0.0.0.0\` or \`127.0.0.1\`, port 1024–65535) opens in the user's browser at ${v.appsBase}/<port>/ : \`bash_tool\` results list newly listening ports with that link. ${jobSkill ? 'Run it as a job (`job start --name web -- …`)' : 'Keep it running in the background'} and give the user the link. The app is served under that path, so use relative links and asset paths (or the \`X-Forwarded-Prefix\` request header; Vite: \`--base /apps/${v.chatId}/<port>/\`), and allow any \`Host\` in dev servers that check it.`, '']
      : []),
    ...(v.tools.includes('sub_agent')
      ? ['## Sub-agent', '', `\`sub_agent\` hands a task to ${cli}, an autonomous coding agent running in this sandbox. It is slow and costly: use it only as a last resort for coding work that needs many build-run-fix iterations, not for things you can do in a few tool calls.${subAgentSkill} Give it a complete, self-contained task. Its result includes a session id; pass it as \`resume_session_id\` to continue that session with a follow-up task.`, '']
      : []),
    '## Limits',
    '',
    'There is no web-search tool: do not claim to have searched the web. Work with the user\'s files, your own knowledge and what the sandbox can compute.'
  ]
  return lines.join('\n') + '\n'
}
