/*
 * A scripted OpenAI Chat Completions model on loopback for agent tests (the n8n AI Agent).
 * POST /v1/chat/completions, streamed (SSE) or not: while the conversation does not end in a tool
 * result, the model calls `tool` with `args`; once it does, it answers with `final(result)`, the
 * result being the text of the last tool message. GET /v1/models lists the one model. Every request
 * body is recorded so a test can assert what the client offered and sent.
 * (test/fixtures/mock-llm/server.mjs is the sub-agent CLIs' mock: it runs inside a sandbox and only
 * knows their shell tools.)
 */
import type { Test } from 'tap'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface ChatRequest {
  model?: string
  stream?: boolean
  messages?: Array<{ role?: string, content?: unknown }>
  tools?: Array<{ type?: string, function?: { name?: string, parameters?: unknown } }>
}

export interface OpenAiMock {
  /** Base URL ending in /v1, as OpenAI clients take it. */
  baseUrl: string
  requests: ChatRequest[]
}

export interface OpenAiScript {
  tool: string
  args: Record<string, unknown>
  final: (toolResult: string) => string
}

const MAX_BODY = 8 * 1024 * 1024

function textOf (content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map(p => typeof p?.text === 'string' ? p.text as string : '').join('\n')
}

function reply (body: ChatRequest, script: OpenAiScript, n: number): { message: Record<string, unknown>, finish: string } {
  const messages = body.messages ?? []
  const last = messages[messages.length - 1]
  // n8n's MCP Client Tool names each tool `<node name>__<tool>` (e.g. Cubicle_sandbox__MCP_Client_Tool__bash_tool).
  const offered = (body.tools ?? []).map(t => t.function?.name).find(name => name === script.tool || name?.endsWith(`__${script.tool}`) === true)
  if (last?.role === 'tool' || offered === undefined) {
    return { message: { role: 'assistant', content: script.final(last?.role === 'tool' ? textOf(last.content) : '') }, finish: 'stop' }
  }
  const call = { id: `call_${n}`, type: 'function', function: { name: offered, arguments: JSON.stringify(script.args) } }
  return { message: { role: 'assistant', content: null, tool_calls: [call] }, finish: 'tool_calls' }
}

function send (res: ServerResponse, body: ChatRequest, out: ReturnType<typeof reply>, n: number): void {
  const head = { id: `chatcmpl-${n}`, created: Math.floor(Date.now() / 1000), model: body.model ?? 'mock-model' }
  const usage = { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 }
  if (body.stream !== true) {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ ...head, object: 'chat.completion', choices: [{ index: 0, message: out.message, finish_reason: out.finish }], usage }))
    return
  }
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  const chunk = (delta: unknown, finish: string | null): void => {
    res.write(`data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`)
  }
  const calls = out.message.tool_calls as Array<Record<string, unknown>> | undefined
  chunk({ role: 'assistant', content: calls ? null : out.message.content, ...(calls ? { tool_calls: calls.map((c, index) => ({ index, ...c })) } : {}) }, null)
  chunk({}, out.finish)
  res.write(`data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', choices: [], usage })}\n\n`)
  res.end('data: [DONE]\n\n')
}

async function readJson (req: IncomingMessage): Promise<ChatRequest> {
  let size = 0
  const chunks: Buffer[] = []
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length
    if (size > MAX_BODY) throw new Error('body too large')
    chunks.push(c)
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatRequest
}

/** Starts the mock on 127.0.0.1 (ephemeral port); closed when the test ends. */
export async function startOpenAiMock (t: Test, script: OpenAiScript): Promise<OpenAiMock> {
  const requests: ChatRequest[] = []
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    if (req.method === 'GET' && path === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'mock-model', object: 'model', created: 0, owned_by: 'test' }] }))
      return
    }
    if (req.method !== 'POST' || path !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `no route ${req.method} ${path}` } }))
      return
    }
    readJson(req).then(body => {
      requests.push(body)
      send(res, body, reply(body, script, requests.length), requests.length)
    }, () => { res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'bad request body' } })) })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => { await new Promise<void>(resolve => { server.closeAllConnections(); server.close(() => resolve()) }) })
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests }
}
