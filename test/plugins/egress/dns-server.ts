import type { Test } from 'tap'
import { createSocket } from 'node:dgram'
import type { AddressInfo } from 'node:net'

/*
 * A DNS server on loopback for the egress resolver tests: it answers the names it is given (A and
 * AAAA), swallows every query for a name under `.hang.test` (a server that never answers), may
 * swallow AAAA only for some names, and answers NXDOMAIN for the rest. It records every query.
 */

export interface DnsServer {
  port: number
  /** every query received, in order */
  queries: Array<{ name: string, type: 'A' | 'AAAA' | number }>
  /** names whose queries were swallowed */
  swallowed: () => Set<string>
}

export interface DnsAnswers { [name: string]: { a?: string[], aaaa?: string[], dropAaaa?: boolean } }

function readName (msg: Buffer, at: number): { name: string, end: number } | null {
  const labels: string[] = []
  let i = at
  while (i < msg.length) {
    const len = msg[i] ?? 0
    if (len === 0) return { name: labels.join('.').toLowerCase(), end: i + 1 }
    if (len > 63) return null
    labels.push(msg.subarray(i + 1, i + 1 + len).toString('latin1'))
    i += 1 + len
  }
  return null
}

function v6Bytes (address: string): Buffer {
  const [head = '', tail = ''] = address.split('::')
  const h = head === '' ? [] : head.split(':')
  const t = tail === '' ? [] : tail.split(':')
  const groups = address.includes('::') ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h
  const buf = Buffer.alloc(16)
  groups.forEach((g, i) => { buf.writeUInt16BE(parseInt(g, 16), i * 2) })
  return buf
}

export async function dnsServer (t: Test, answers: DnsAnswers): Promise<DnsServer> {
  const socket = createSocket('udp4')
  const queries: DnsServer['queries'] = []
  const swallowed = new Set<string>()
  socket.on('message', (msg, rinfo) => {
    const q = readName(msg, 12)
    if (q === null || msg.length < q.end + 4) return
    const qtype = msg.readUInt16BE(q.end)
    const type = qtype === 1 ? 'A' : qtype === 28 ? 'AAAA' : qtype
    queries.push({ name: q.name, type })
    const entry = answers[q.name]
    if (q.name.endsWith('.hang.test') || (type === 'AAAA' && entry?.dropAaaa === true)) { swallowed.add(q.name); return }
    const records = entry === undefined ? [] : type === 'A' ? (entry.a ?? []) : type === 'AAAA' ? (entry.aaaa ?? []) : []
    const header = Buffer.alloc(12)
    header.writeUInt16BE(msg.readUInt16BE(0), 0)
    header.writeUInt16BE(0x8180 | (entry === undefined ? 3 : 0), 2)
    header.writeUInt16BE(1, 4)
    header.writeUInt16BE(records.length, 6)
    const rr = records.map(address => {
      const data = type === 'A' ? Buffer.from(address.split('.').map(Number)) : v6Bytes(address)
      const fixed = Buffer.alloc(12)
      fixed.writeUInt16BE(0xc00c, 0)
      fixed.writeUInt16BE(qtype, 2)
      fixed.writeUInt16BE(1, 4)
      fixed.writeUInt32BE(60, 6)
      fixed.writeUInt16BE(data.length, 10)
      return Buffer.concat([fixed, data])
    })
    socket.send(Buffer.concat([header, msg.subarray(12, q.end + 4), ...rr]), rinfo.port, rinfo.address)
  })
  await new Promise<void>(resolve => socket.bind(0, '127.0.0.1', resolve))
  t.teardown(() => { socket.close() })
  return { port: (socket.address() as AddressInfo).port, queries, swallowed: () => swallowed }
}
