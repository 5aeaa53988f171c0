/*
 * What fills the server's JS heap, from V8 heap snapshots (bench/server-probe.mjs writes them): self
 * size by constructor (objects) or by kind (strings, code, arrays, closures…), and the difference
 * between two snapshots (what `n` live chats added, per chat).
 */
import { readFileSync } from 'node:fs'

interface Snapshot {
  snapshot: { meta: { node_fields: string[], node_types: [string[], ...unknown[]] } }
  nodes: number[]
  strings: string[]
}

/** Self size in bytes per class: `Foo` for objects of constructor Foo, `(string)`, `(code)`, … otherwise. */
export function heapByClass (file: string): Map<string, { size: number, count: number }> {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot
  const fields = s.snapshot.meta.node_fields
  const types = s.snapshot.meta.node_types[0]
  const width = fields.length
  const fType = fields.indexOf('type')
  const fName = fields.indexOf('name')
  const fSize = fields.indexOf('self_size')
  const out = new Map<string, { size: number, count: number }>()
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + fType] ?? 0] ?? '?'
    const key = type === 'object' || type === 'native' ? (s.strings[s.nodes[i + fName] ?? 0] ?? '?').slice(0, 60) : `(${type})`
    const e = out.get(key) ?? { size: 0, count: 0 }
    e.size += s.nodes[i + fSize] ?? 0
    e.count++
    out.set(key, e)
  }
  return out
}

const kib = (n: number): string => `${(n / 1024).toFixed(0)} KiB`

/** The largest classes of one snapshot. */
export function topClasses (m: Map<string, { size: number, count: number }>, top = 10): string {
  const total = [...m.values()].reduce((a, b) => a + b.size, 0)
  return `${(total / 1048576).toFixed(1)} MiB in all: ` + [...m].sort((a, b) => b[1].size - a[1].size).slice(0, top)
    .map(([k, v]) => `${k} ${kib(v.size)} (${v.count})`).join(', ')
}

/** What grew from `a` to `b`, per chat (n chats): the classes that added most. */
export function growth (a: Map<string, { size: number, count: number }>, b: Map<string, { size: number, count: number }>, n: number, top = 12): string {
  const diff: Array<[string, number, number]> = []
  for (const [k, v] of b) {
    const was = a.get(k) ?? { size: 0, count: 0 }
    diff.push([k, v.size - was.size, v.count - was.count])
  }
  const total = diff.reduce((s, d) => s + d[1], 0)
  return `${kib(total / n)} per chat: ` + diff.sort((x, y) => y[1] - x[1]).slice(0, top)
    .map(([k, size, count]) => `${k} ${(size / n / 1024).toFixed(1)} KiB (${(count / n).toFixed(0)} objects)`).join(', ')
}
