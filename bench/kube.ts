/*
 * (l) 200 chats × 5 calls on the Kubernetes engine (docs/kubernetes.md): the server as deployed,
 * with SANDBOX_ENGINE=kubernetes, against the fake API server (test/fixtures/fake-kube, in this
 * process: pods as Docker containers on this machine, claims as volumes), which authorizes every
 * request with deploy/kubernetes/rbac.yaml. The load is bench/load.ts's: errors (goal 0), chats with
 * exactly one pod by their chat-key label (goal: every chat), the later calls' p99 (goal ≤ 1 s),
 * the server's RSS at 200 live chats (goal ≤ 150 MiB). The API requests refused by the Role are
 * counted too (goal 0). BENCH_L=20x5 changes the chats × calls. BENCH_L_ARRIVAL=<n> paces the arrival instead of
 * all at once: at most n chats in their first call at a time, the later calls together once all are live
 * (bench/load.ts; docs/performance.md says which figure is which).
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { chatKey } from '../core/chat-id.js'
import { rulesFromYaml } from '../test/fixtures/fake-kube/rbac.js'
import { startFakeKube } from '../test/fixtures/fake-kube/server.js'
import { PREFIX, root, startServer } from './common.js'
import { benchLoad, type LoadResult } from './load.js'

const NS = 'cubicle-bench'
export const [L_CHATS, L_CALLS] = (process.env.BENCH_L ?? '200x5').split('x').map(Number) as [number, number]
const ARRIVAL = process.env.BENCH_L_ARRIVAL === undefined || process.env.BENCH_L_ARRIVAL === '' ? undefined : Number(process.env.BENCH_L_ARRIVAL)
if (ARRIVAL !== undefined && !(Number.isInteger(ARRIVAL) && ARRIVAL > 0)) throw new Error(`BENCH_L_ARRIVAL must be a positive integer, got "${process.env.BENCH_L_ARRIVAL ?? ''}"`)

interface Pod { metadata: { uid: string, labels?: Record<string, string> } }

export async function benchKube (dataDir: string): Promise<LoadResult & { refused: string[] }> {
  // The fake's Docker prefix is the server's SANDBOX_PREFIX with a suffix: cleanup() of common.ts finds neither's leftovers by the other's.
  const kube = await startFakeKube(0, '127.0.0.1', { prefix: `${PREFIX}k`, rbac: rulesFromYaml(await readFile(join(root, 'deploy/kubernetes/rbac.yaml'), 'utf8')) })
  const address = kube.server.address()
  const api = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`
  // The shared claim of deploy/kubernetes/data.yaml; in fake-kube a claim annotated with a host path is that directory.
  const shared = await fetch(`${api}/api/v1/namespaces/${NS}/persistentvolumeclaims`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ metadata: { name: 'cubicle-data', annotations: { 'fake-kube/host-path': dataDir } }, spec: { accessModes: ['ReadWriteMany'], resources: { requests: { storage: '10Gi' } } } })
  })
  if (shared.status !== 201) throw new Error(`fake-kube refused the shared claim: ${shared.status} ${await shared.text()}`)
  const server = await startServer(dataDir, undefined, { SANDBOX_ENGINE: 'kubernetes', KUBE_API_URL: api, KUBE_NAMESPACE: NS, KUBE_SHARED_CLAIM: 'cubicle-data' })
  try {
    const count = async (label: string, chats: number): Promise<{ all: Array<{ Id: string }>, onePerChat: number }> => {
      const pods = kube.store.list('pods', NS, () => true, () => true) as unknown as Pod[]
      const all: Array<{ Id: string }> = []
      let onePerChat = 0
      for (let chat = 0; chat < chats; chat++) {
        const key = chatKey(`bench-${label}-${chat}`)
        const mine = pods.filter(p => p.metadata.labels?.['cu.chat-key'] === key)
        for (const p of mine) {
          const id = kube.runner.containerOf(p.metadata.uid)
          if (id !== undefined) all.push({ Id: id })
        }
        if (mine.length === 1) onePerChat++
      }
      return { all, onePerChat }
    }
    const r = await benchLoad(server, 'l', L_CHATS, L_CALLS, { count, unit: 'pod', goals: { rssMiB: 150, laterMs: 1000 }, arrival: ARRIVAL })
    const refused = [...kube.authorizer!.refused]
    const used = [...kube.authorizer!.used].map(([k, n]) => `${k} ×${n}`).join(', ')
    return { ...r, refused, lines: [...r.lines, `    API requests under deploy/kubernetes/rbac.yaml: refused ${refused.length} (goal 0)${refused.length > 0 ? `: ${[...new Set(refused)].join(', ')}` : ''}; granted: ${used}`] }
  } finally {
    await server.stop()
    await kube.close()
  }
}
