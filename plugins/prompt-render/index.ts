import { existsSync, statSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import { parseOptions } from '../../core/config.js'
import { PROMPT_SKILLS_DIR_MISSING } from './errors.js'
import { PromptRenderOptions } from './schemas.js'
import { createPromptService } from './service.js'
import type {} from '../mcp-transport/types.js'
import type {} from '../user-skills/types.js'

const BUILTIN_TOOLS = ['bash_tool', 'view', 'create_file', 'str_replace'] as const

/**
 * The repository's sandbox-image/skills: exactly what the image copies to /mnt/skills. Found from this
 * file in the source tree (tsx) or in the build's bundle in dist/core/ (both two levels up), or in
 * dist/plugins/prompt-render/ when compiled on its own (three levels up). Reading the tree here
 * instead of running a container keeps boot free of Docker.
 */
function bundledSkillsDir (): string {
  for (const rel of ['../../sandbox-image/skills', '../../../sandbox-image/skills']) {
    const dir = fileURLToPath(new URL(rel, import.meta.url))
    if (existsSync(dir)) return dir
  }
  return fileURLToPath(new URL('../../sandbox-image/skills', import.meta.url))
}

/** The one prompt renderer (docs/contract.md#prompt-tiers) behind every tier, with its render cache and skills index. */
const promptRender: FastifyPluginAsync<PromptRenderOptions> = async (fastify, raw) => {
  const opts = parseOptions(PromptRenderOptions, raw, 'prompt-render')
  const skillsDir = opts.skillsDir.trim() !== '' ? opts.skillsDir.trim() : bundledSkillsDir()
  if (!existsSync(skillsDir) || !statSync(skillsDir).isDirectory()) throw new PROMPT_SKILLS_DIR_MISSING(skillsDir)
  const log = fastify.log.child({ plugin: 'prompt-render' })
  // Without the MCP registry (tests, other front ends) the prompt names the contract's built-in tools.
  const tools = (): string[] => fastify.hasDecorator('mcp') ? fastify.mcp.listTools().map(t => t.name) : [...BUILTIN_TOOLS]
  // Per-user skills are optional: without the user-skills plugin every user gets the defaults.
  const userSkills = fastify.hasDecorator('userSkills') ? fastify.userSkills : undefined
  // App preview URLs exist when the ports plugin (loaded later) decorated `ports`; asked at render time.
  const apps = (): boolean => fastify.hasDecorator('ports')
  const prompts = await createPromptService({ links: fastify.links, log, ...(userSkills !== undefined && { userSkills }) }, { ...opts, skillsDir, tools, apps })
  // docs/contract.md#render-cache: a user's skill list changed (new configuration, a download landed).
  userSkills?.onChange(email => { prompts.invalidateUser(email) })
  log.info({ skills: (await prompts.skills()).map(s => s.name) }, 'skills indexed')
  fastify.decorate('prompts', prompts)
  fastify.addHook('onClose', async () => {
    const s = prompts.stats()
    log.info({ hits: s.hits, misses: s.misses, hitRatio: Number(s.hitRatio.toFixed(3)), avgRenderMs: Number(s.avgRenderMs.toFixed(3)) }, 'render cache statistics')
  })
}

export default fp(promptRender, {
  name: 'prompt-render',
  fastify: '5.x',
  dependencies: ['capabilities'],
  decorators: { fastify: ['links'] }
})
