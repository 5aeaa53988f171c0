/*
 * (g) terminal keystroke echo through the WebSocket ÷ a direct `docker exec -it` TTY relay of the same
 * tmux session, p50 and p99 (goal ≤ 1.2).
 */
import WebSocket from 'ws'
import type { Duplex } from 'node:stream'
import { BASE, bash, chatContainer, client, docker, median, ms, now, pct } from './common.js'

const KEYS = 300

/** Resolves with the time from `send()` until `byte` appears in what `subscribe` delivers. */
async function echoTime (subscribe: (listener: (data: Buffer) => void) => () => void, byte: number, send: () => void): Promise<number> {
  return await new Promise(resolve => {
    const t0 = now()
    const off = subscribe(data => { if (data.includes(byte)) { off(); resolve(now() - t0) } })
    send()
  })
}

/**
 * (g) Keystroke echo: one key typed into the chat's tmux session `main`, timed until tmux echoes it;
 * through the server's WebSocket (ttyd framing, token-less in open mode) and, as the baseline,
 * through a TTY exec of the same `tmux new-session -A -s main` opened with dockerode (what
 * `docker exec -it` does), key by key in alternation so that load drift hits both alike.
 */
export async function benchTerminal (): Promise<string> {
  const c = await client('bench-g')
  await bash(c, 'true')
  await c.close()
  const info = await chatContainer('bench-g')
  if (info === undefined) throw new Error('no container')
  const ws = new WebSocket(`${BASE.replace('http', 'ws')}/terminal/bench-g/ws`, ['tty'])
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject) })
  ws.send(JSON.stringify({ columns: 120, rows: 40 }))
  const viaSocket = (listener: (data: Buffer) => void): () => void => {
    const handler = (data: Buffer): void => { if (data[0] === 0x30) listener(data.subarray(1)) }
    ws.on('message', handler)
    return () => { ws.off('message', handler) }
  }
  const exec = await docker.getContainer(info.Id).exec({
    Cmd: ['tmux', '-u', 'new-session', '-A', '-s', 'main'],
    User: 'assistant',
    WorkingDir: '/home/assistant',
    Env: ['TERM=xterm-256color'],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    Tty: true
  })
  const direct = await exec.start({ hijack: true, stdin: true, Tty: true }) as unknown as Duplex
  await exec.resize({ w: 120, h: 40 })
  direct.resume()
  const viaDirect = (listener: (data: Buffer) => void): () => void => {
    direct.on('data', listener)
    return () => { direct.off('data', listener) }
  }
  await new Promise(resolve => setTimeout(resolve, 1500)) // both clients attached and drawn
  const socketTimes: number[] = []
  const directTimes: number[] = []
  for (let i = 0; i < KEYS; i++) {
    // Ctrl-U now and then keeps the shell's line short (a long line redraws more on each key). The keys
    // q and z appear nowhere in tmux's status line (session, window, host, clock), so only echoes match.
    if (i % 40 === 0) { ws.send('0\x15'); await new Promise(resolve => setTimeout(resolve, 200)) }
    socketTimes.push(await echoTime(viaSocket, 0x71, () => { ws.send('0q') }))
    directTimes.push(await echoTime(viaDirect, 0x7a, () => { direct.write('z') }))
  }
  ws.send('0\x15')
  ws.close()
  direct.destroy()
  const [s50, s99, d50, d99] = [median(socketTimes), pct(socketTimes, 0.99), median(directTimes), pct(directTimes, 0.99)]
  return `(g) terminal keystroke echo via the WebSocket p50 ${ms(s50)} p99 ${ms(s99)} ÷ direct docker exec -it p50 ${ms(d50)} p99 ${ms(d99)} = ` +
    `p50 ${(s50 / d50).toFixed(2)}, p99 ${(s99 / d99).toFixed(2)} (goal ≤ 1.2; ${KEYS} keys each)`
}
