import type { FastifyPluginAsync, RouteShorthandOptions } from 'fastify'
import { chatAccess, chatOf, chatRoutes } from '../../core/route-kit.js'
import { ErrorResponse } from '../../core/errors.js'
import { ChatParams as ChatParamsSchema, ChatQuery, HAND_CHECKED, NoBody } from '../../core/route-schema.js'
import { TERMINAL_BAD_PID, TERMINAL_BAD_REQUEST } from './errors.js'
import { parsePid, type CliControl } from './cli.js'
import {
  HeartbeatReply, KillParams, KillReply, ProcessesReply, RestartReply, ResurrectReply, SessionsReply, StartBody, StartReply, StatusReply, StopReply,
  type ChatParams
} from './schemas.js'
import type { TerminalService } from './types.js'

export interface TerminalRoutesOptions { service: TerminalService, cli: CliControl }

const BASE = '/terminal/:chat'
const PATHS = ['status', 'start-ttyd', 'stop-ttyd', 'restart-container', 'resurrect-container', 'sessions', 'processes', 'processes/:pid/kill', 'heartbeat']

/**
 * Inputs are documented here and checked by hand, in the order the routes promise (chat id in the
 * onRequest hook, then credentials, then pid or body with their own codes): HAND_CHECKED.
 */
const get = (summary: string, response: unknown, params: unknown = ChatParamsSchema): RouteShorthandOptions =>
  ({ ...HAND_CHECKED, schema: { summary, tags: ['terminal'], params, querystring: ChatQuery, response: { 200: response, '4xx': ErrorResponse } } })
const post = (summary: string, response: unknown, body: unknown = NoBody, params: unknown = ChatParamsSchema): RouteShorthandOptions =>
  ({ ...HAND_CHECKED, bodyLimit: 4096, schema: { summary, tags: ['terminal'], params, querystring: ChatQuery, body, response: { 200: response, '4xx': ErrorResponse } } })

/** `{"dangerous_mode": bool}`, or no body at all. */
function dangerousMode (body: unknown): boolean {
  if (body === undefined || body === null) return false
  if (typeof body !== 'object' || Array.isArray(body)) throw new TERMINAL_BAD_REQUEST('the body must be a JSON object')
  const value = (body as Record<string, unknown>).dangerous_mode
  if (value === undefined) return false
  if (typeof value !== 'boolean') throw new TERMINAL_BAD_REQUEST('dangerous_mode must be true or false')
  return value
}

/**
 * The terminal's HTTP routes (docs/contract.md#terminal). Every one needs a control token of the chat or the
 * API key (docs/contract.md#capability-tokens), checked in onRequest, before a body is read; chat id first (400), then
 * credentials (401/403), only then the sandbox's state (404/409). Handlers are thin: the service
 * does the work and never starts a sandbox except for restart and resurrect; sessions, processes and
 * kill go to the sub-agent plugin's service (cli.ts).
 */
const routes: FastifyPluginAsync<TerminalRoutesOptions> = async (fastify, { service, cli }) => {
  chatRoutes(fastify, PATHS.map(p => `${BASE}/${p}`))
  const access = chatAccess('c')
  fastify.addHook('onRequest', async (request, res) => {
    if (request.method === 'OPTIONS') return
    await access(request, res)
    res.header('Cache-Control', 'no-cache, no-store')
  })

  fastify.get<{ Params: ChatParams }>(`${BASE}/status`, get('Whether the sandbox runs and tmux session main exists; or that it is stopped or removed', StatusReply),
    async request => await service.status(chatOf(request)))

  fastify.post<{ Params: ChatParams }>(`${BASE}/start-ttyd`, post('Starts tmux session main (dangerous_mode: with NO_AUTOSTART=1)', StartReply, StartBody), async request => {
    const { started } = await service.start(chatOf(request), { dangerousMode: dangerousMode(request.body) })
    return started ? { started: true } : { started: false, already_running: true }
  })

  fastify.post<{ Params: ChatParams }>(`${BASE}/stop-ttyd`, post('Ends tmux session main and detaches its viewers', StopReply), async request => {
    await service.stop(chatOf(request))
    return { stopped: true }
  })

  fastify.post<{ Params: ChatParams }>(`${BASE}/restart-container`, post('Starts the chat\'s stopped sandbox', RestartReply), async request => {
    await service.restart(chatOf(request))
    return { restarted: true }
  })

  fastify.post<{ Params: ChatParams }>(`${BASE}/resurrect-container`, post('Recreates the chat\'s removed sandbox from its meta.json', ResurrectReply), async request => {
    const { userEmail } = await service.resurrect(chatOf(request))
    return { resurrected: true, user_email: userEmail }
  })

  fastify.get<{ Params: ChatParams }>(`${BASE}/sessions`, get('The sub-agent CLI\'s saved sessions, newest first', SessionsReply),
    async request => ({ sessions: await cli.sessions(chatOf(request)) }))

  fastify.get<{ Params: ChatParams }>(`${BASE}/processes`, get('The sub-agent CLI\'s processes in the sandbox', ProcessesReply),
    async request => ({ processes: await cli.processes(chatOf(request)) }))

  fastify.post<{ Params: KillParams }>(`${BASE}/processes/:pid/kill`, post('Stops one sub-agent CLI process (SIGTERM, then SIGKILL)', KillReply, NoBody, KillParams), async request => {
    const pid = parsePid(request.params.pid)
    if (pid === null) throw new TERMINAL_BAD_PID('pid must be a decimal integer from 2 to 4194304 (PID 1 is the sandbox\'s init and is never killed)')
    await cli.kill(chatOf(request), pid)
    return { killed: true, pid }
  })

  fastify.get<{ Params: ChatParams }>(`${BASE}/heartbeat`, get('Records activity of a watching human; never starts a sandbox', HeartbeatReply), async request => {
    await service.heartbeat(chatOf(request))
    return { ok: true }
  })
}

export default routes
