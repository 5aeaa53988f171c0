import type { Test } from 'tap'
import http from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import Fastify from 'fastify'
import { Value } from 'typebox/value'
import { EgressOptions } from '../../../plugins/egress/schemas.js'
import { createEgressService } from '../../../plugins/egress/service.js'

/*
 * The egress service as the plugin builds it (default resolver, default limits unless a test sets
 * them), listening on loopback: each chat's sandbox is a loopback source address (127.0.0.2, …), so
 * the proxy tells chats apart by source address as it does on the sandbox network.
 */

export const OPTS = Value.Default(EgressOptions, {}) as Required<EgressOptions>

export interface Harness {
  port: number
  built: ReturnType<typeof createEgressService>
  /** the source address of a chat's sandbox */
  source: (chat: string) => string
}

export async function egressService (t: Test, chats: string[], opts: Partial<Required<EgressOptions>> = {}): Promise<Harness> {
  const source = (chat: string): string => `127.0.0.${2 + chats.indexOf(chat)}`
  const built = createEgressService({
    sandbox: { network: () => ({ name: 'test', gateway: '127.0.0.1', subnet: '127.0.0.0/8' }), address: async chat => source(chat) },
    log: Fastify({ logger: false }).log,
    firewall: false
  }, { ...OPTS, port: 0, ...opts })
  t.teardown(async () => { await built.close() })
  for (const chat of chats) await built.attach(chat, { started: true })
  const port = (built.proxy.server.address() as AddressInfo).port
  return { port, built, source }
}

export interface Answer { status: number, message: string, socket: Socket, head: string }

/** Sends one proxy request from a source address: the socket at once, the response head when it comes (the socket stays open on 200). */
export function send (port: number, from: string, line: string): { socket: Socket, answer: Promise<Answer> } {
  const socket = connect({ host: '127.0.0.1', port, localAddress: from })
  const answer = new Promise<Answer>((resolve, reject) => {
    let text = ''
    const onData = (c: Buffer): void => {
      text += c.toString('latin1')
      const end = text.indexOf('\r\n\r\n')
      if (end < 0) return
      socket.off('data', onData)
      const m = /^HTTP\/1\.1 (\d{3}) ?([^\r]*)/.exec(text)
      resolve({ status: Number(m?.[1] ?? 0), message: m?.[2] ?? '', socket, head: text.slice(0, end) })
    }
    socket.on('data', onData)
    socket.once('error', reject)
    socket.once('close', () => { resolve({ status: 0, message: 'closed without an answer', socket, head: text }) })
  })
  socket.write(`${line}\r\n\r\n`)
  return { socket, answer }
}

export async function request (port: number, from: string, line: string): Promise<Answer> {
  return await send(port, from, line).answer
}

/** CONNECT from a source address. */
export async function tunnel (port: number, from: string, authority: string): Promise<Answer> {
  return await request(port, from, `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}`)
}

/** An upstream on loopback answering every request with its text (or `/big?n` with n bytes). */
export async function upstream (t: Test, text: string): Promise<number> {
  const server = http.createServer((req, res) => {
    const big = /^\/big\?(\d+)$/.exec(req.url ?? '')
    if (big !== null) { res.end(Buffer.alloc(Number(big[1]), 97)); return }
    res.end(`${text} ${req.url ?? ''}`)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.closeAllConnections(); server.close() })
  return (server.address() as AddressInfo).port
}
