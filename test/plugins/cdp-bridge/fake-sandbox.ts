/*
 * A SandboxService whose openStream() reaches a TCP server on the test's loopback instead of a
 * socat relay inside a container: the bridge's relay, HTTP and WebSocket code run unchanged on a
 * real socket, without Docker. `port` names the loopback port that stands for the sandbox's CDP port.
 */
import { connect } from 'node:net'
import fp from 'fastify-plugin'
import type { FastifyPluginAsync } from 'fastify'
import type { SandboxService, SandboxStream, StopHook } from '../../../plugins/sandbox/types.js'

export interface FakeSandbox {
  sandbox: SandboxService
  plugin: FastifyPluginAsync
  running: Set<string>
  /** loopback port the relay connects to */
  port: { value: number }
  leases: () => number
  streams: () => number
  argvs: string[][]
  stop: (chatId: string) => void
}

export function fakeSandbox (): FakeSandbox {
  const running = new Set<string>()
  const port = { value: 0 }
  const hooks: StopHook[] = []
  const argvs: string[][] = []
  let leases = 0
  let streams = 0
  const notUsed = async (): Promise<never> => { throw new Error('not used by cdp-bridge') }
  const sandbox: SandboxService = {
    ensure: notUsed,
    async status (chatId) { return { state: running.has(chatId) ? 'running' : 'absent', metaExists: true } },
    exec: notUsed,
    runCommand: notUsed,
    putFile: notUsed,
    lease () {
      leases++
      let done = false
      return () => { if (!done) { done = true; leases-- } }
    },
    touch () {},
    stop: notUsed,
    remove: notUsed,
    onEnsure () {},
    onStop (hook) { hooks.push(hook) },
    async openStream (chatId, argv): Promise<SandboxStream> {
      if (!running.has(chatId)) throw Object.assign(new Error('not running'), { code: 'SANDBOX_NOT_RUNNING' })
      argvs.push(argv)
      const socket = connect(port.value, '127.0.0.1')
      streams++
      socket.once('close', () => { streams-- })
      // Like socat: a refused connection ends the stream without data.
      socket.on('error', () => { socket.destroy() })
      return {
        socket,
        demux (onStdout) { socket.on('data', (c: Buffer) => { onStdout(c) }) },
        async resize () {},
        async exitCode () { return 0 },
        close () { socket.destroy() }
      }
    }
  }
  const plugin = fp(async app => { app.decorate('sandbox', sandbox) }, { name: 'sandbox', fastify: '5.x' })
  return {
    sandbox,
    plugin,
    running,
    port,
    leases: () => leases,
    streams: () => streams,
    argvs,
    stop: chatId => { running.delete(chatId); for (const h of hooks) h(chatId, 'stopped') }
  }
}
