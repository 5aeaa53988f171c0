import type { FastifyPluginAsync, RouteShorthandOptions } from 'fastify'
import { readUser } from '../../core/identity.js'
import { noteKey, requireKey } from '../../core/route-kit.js'
import type {} from '../user-skills/types.js'
import { HAND_CHECKED, mediaReply } from '../../core/route-schema.js'
import { SkillMountsReply, SkillQuery, SystemPromptQuery, UserHeaders, type LooseQuery } from './schemas.js'
import { resolveChat, resolveEmail } from './resolve.js'

export interface TierHttpRoutesOptions { singleUserMode: string }

const TEXT = 'text/plain; charset=utf-8'
/** Cuts to `max` code points (never splitting a surrogate pair). */
const cut = (s: string, max: number): string => Array.from(s).slice(0, max).join('')

// Read leniently and checked by hand (a repeated key is an array; chat id 400 invalid_chat_id, then the key): HAND_CHECKED.
const text = (summary: string, querystring: unknown, description: string): RouteShorthandOptions =>
  ({ ...HAND_CHECKED, schema: { summary, tags: ['prompt'], querystring, headers: UserHeaders, produces: ['text/plain'], response: { 200: mediaReply(description, ['text/plain']) } } })

const routes: FastifyPluginAsync<TierHttpRoutesOptions> = async (fastify, opts) => {
  const { prompts, links } = fastify

  // Tier 6 (docs/contract.md#tier-6-get-system-prompt): the prompt over plain HTTP for clients that inject it themselves.
  fastify.get<{ Querystring: LooseQuery }>('/system-prompt', text('The system prompt as text; with a chat id (API key needed) also the chat\'s links as headers', SystemPromptQuery, 'the system prompt; X-Public-Base-URL, and with a chat X-Files-Base-URL, X-Archive-URL, X-Preview-URL'), async (request, reply) => {
    const chatId = resolveChat(request, request.query, opts.singleUserMode)
    // The chat form hands out capability tokens, so it needs the key; the legacy template does not,
    // but a caller that presents it is still known as the operator's (its settings-service headers count).
    if (chatId !== undefined) await requireKey(request, reply)
    else noteKey(request)
    const email = resolveEmail(request, request.query)
    const { credentials } = readUser(request.headers, request.principal)
    const text = await prompts.render({ ...(chatId !== undefined && { chatId }), ...(email !== undefined && { email }), credentials })
    reply.header('Content-Type', TEXT).header('Cache-Control', 'no-store').header('X-Public-Base-URL', links.publicBaseUrl)
    if (chatId !== undefined) {
      reply.header('X-Files-Base-URL', links.filesBase(chatId))
        .header('X-Archive-URL', links.archiveUrl(chatId))
        .header('X-Preview-URL', links.previewUrl(chatId, 'c'))
      // The live browser (cdp-bridge): the preview opened on its Browser view, with the control token.
      if (fastify.hasDecorator('cdp')) reply.header('X-Browser-URL', `${links.previewUrl(chatId, 'c')}#browser`)
    }
    return text
  })

  // docs/contract.md#skills: one line per skill; `format` is accepted for compatibility and has no effect.
  fastify.get<{ Querystring: LooseQuery }>('/skill-list', text('The skills the user\'s sandboxes see, one line each', SkillQuery, 'one line per skill: `- name: location - description`'), async (request, reply) => {
    await requireKey(request, reply)
    const email = resolveEmail(request, request.query)
    const skills = await prompts.skills({ ...(email !== undefined && { email }), credentials: readUser(request.headers, request.principal).credentials })
    reply.header('Content-Type', TEXT).header('Cache-Control', 'no-store')
    return skills.map(s => `- ${s.name}: ${s.location} - ${cut(s.description, 120)}\n`).join('')
  })

  // docs/contract.md#skills: the user's already cached skills as Docker bind specs; {} without an email. Never downloads.
  fastify.get<{ Querystring: LooseQuery }>('/skill-mounts', {
    ...HAND_CHECKED,
    schema: { summary: 'The user\'s cached skills as Docker bind mounts (never downloads)', tags: ['prompt'], querystring: SkillQuery, headers: UserHeaders, response: { 200: SkillMountsReply } }
  }, async (request, reply) => {
    await requireKey(request, reply)
    const email = resolveEmail(request, request.query)
    reply.header('Cache-Control', 'no-store')
    const mounts: Record<string, { bind: string, mode: 'ro' }> = {}
    if (email === undefined || !fastify.hasDecorator('userSkills')) return mounts
    const set = await fastify.userSkills.cached({ email, credentials: readUser(request.headers, request.principal).credentials })
    for (const s of set.ready) mounts[s.hostDir] = { bind: `/mnt/skills/user/${s.name}`, mode: 'ro' }
    return mounts
  })
}

export default routes
