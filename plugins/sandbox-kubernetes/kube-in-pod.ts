import type { SandboxEngine } from '../sandbox/types.js'
import type { KubeClient } from './kube-client.js'
import { execCalls, type Execs } from './kube-exec.js'
import { getPod, podOomKilled, podRunning } from './kube-pods.js'
import type { Records } from './kube-records.js'

/*
 * The engine's calls that run something in a sandbox's pod (kube-engine.ts): exec, putFile, the stats of
 * its cgroup and its OOM kills, all through pods/exec (kube-exec.ts). A failed exec upgrade is told in the
 * contract's words from the sandbox's record: no-such-sandbox, else not-running.
 */

export interface InPodDeps {
  client: KubeClient
  records: Records
  /** the sandbox user the core names (`assistant`): every process runs as the pod's user */
  user: string
}

export type InPodCalls = Pick<SandboxEngine, 'exec' | 'putFile' | 'stats' | 'oomKills'> & {
  /** SIGSTOP (pause) or SIGCONT (unpause) to every process of the sandbox's user */
  signalAll: Execs['signalAll']
  /** the sandbox is gone: its OOM counters with it */
  forget: (id: string) => void
}

export function inPodCalls (d: InPodDeps): InPodCalls {
  const { client, records } = d
  const { paused, find, mustFind } = records
  const execs = execCalls({
    client,
    user: d.user,
    paused: id => paused.has(id),
    explain: async (id, err) => {
      const s = await find(id)
      if (s === undefined) return err.as('no-such-sandbox')
      return err.as('not-running', `sandbox ${id} is not running: ${err.message}`)
    }
  })
  /** OOM-kill counters seen per sandbox (the cgroup's count since the pod started). */
  const oomSeen = new Map<string, Array<{ at: number, count: number }>>()
  const saw = (id: string, count: number): Array<{ at: number, count: number }> => {
    const seen = oomSeen.get(id) ?? []
    seen.push({ at: Date.now(), count })
    oomSeen.set(id, seen.slice(-16))
    return seen
  }

  return {
    exec: execs.exec,
    signalAll: execs.signalAll,

    // Files belong to the sandbox's user whatever uid and gid the caller named: the pod's processes
    // cannot give a file away (docs/engine.md#kubernetes).
    async putFile (id, path, content, mode) { await execs.putFile(id, path, content, mode) },

    async stats (id) {
      const s = await mustFind(id)
      const st = await execs.stats(s.id, { memory: s.spec.limits.memory })
      saw(s.id, st.oomKills)
      return { pids: st.pids, memory: st.memory }
    },

    async oomKills (id, sinceMs, untilMs) {
      const s = await find(id)
      if (s === undefined) return 0
      const pod = await getPod(client, s.id)
      let count = podOomKilled(pod) ? 1 : 0
      if (podRunning(pod) && !paused.has(s.id)) {
        const now = (await execs.stats(s.id, { memory: s.spec.limits.memory }).catch(() => undefined))?.oomKills
        if (now !== undefined) {
          const before = [...(oomSeen.get(s.id) ?? [])].reverse().find(x => x.at <= sinceMs)
          if (untilMs >= Date.now() - 1000) count += Math.max(0, now - (before?.count ?? 0))
          saw(s.id, now)
        }
      }
      return count
    },

    forget (id) { oomSeen.delete(id) }
  }
}
