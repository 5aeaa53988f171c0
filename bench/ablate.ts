/*
 * What in the sandbox's configuration the engine's create + start pays for, measured: the server's
 * own container re-created by hand (same image, env, limits, network, tmpfs, mounts, a fresh home
 * volume), then the same without one part at a time, all in alternation so that load drift hits each
 * alike. Used by bench/profile-first-call.ts (BENCH_ABLATE=1).
 */
import type Docker from 'dockerode'
import { docker, median, ms, now, PREFIX, rawContainer } from './common.js'

type Options = Docker.ContainerCreateOptions & { HostConfig: Docker.HostConfig & { Mounts?: Docker.MountSettings[], Tmpfs?: Record<string, string>, StorageOpt?: Record<string, string> } }

/** The server's container `name` as create options (a fresh home volume `…-rawhome-{n}`). */
export async function cloneOf (name: string, n: number | string): Promise<Options> {
  const info = await docker.getContainer(name).inspect()
  const hc = info.HostConfig as Options['HostConfig']
  const mounts = (hc.Mounts ?? []).map(m => m.Type === 'volume' ? { ...m, Source: `${PREFIX}-rawhome-${n}` } : m)
  return {
    name: `${PREFIX}-rawclone-${n}`,
    Image: info.Config.Image,
    Cmd: info.Config.Cmd ?? undefined,
    Hostname: `rawclone-${n}`,
    User: info.Config.User,
    WorkingDir: info.Config.WorkingDir,
    Env: info.Config.Env,
    Labels: { 'bench-raw': PREFIX },
    HostConfig: { ...hc, Mounts: mounts }
  }
}

const VARIANTS: Record<string, (o: Options) => Options> = {
  'the same configuration': o => o,
  'without its network (default bridge, no sysctls)': o => ({ ...o, HostConfig: { ...o.HostConfig, NetworkMode: 'default', Sysctls: {} } }),
  'without mounts (home volume, uploads, outputs)': o => ({ ...o, HostConfig: { ...o.HostConfig, Mounts: [] } }),
  'without tmpfs': o => ({ ...o, HostConfig: { ...o.HostConfig, Tmpfs: {} } }),
  'without limits (memory, cpu, pids, disk)': o => ({ ...o, HostConfig: { ...o.HostConfig, Memory: 0, MemorySwap: 0, NanoCpus: 0, PidsLimit: 0, StorageOpt: {} } }),
  'without the image entrypoint (sleep only)': o => ({ ...o, Entrypoint: ['sleep'], Cmd: ['infinity'] })
}

/** Median create and start per variant over `rounds` rounds; the plain raw container as the reference. */
export async function ablateStart (name: string, rounds: number): Promise<string[]> {
  const base = await cloneOf(name, 'ablate')
  const times = new Map<string, { create: number[], start: number[] }>()
  const record = (k: string, create: number, start: number): void => {
    const t = times.get(k) ?? { create: [], start: [] }
    t.create.push(create); t.start.push(start); times.set(k, t)
  }
  for (let r = 0; r < rounds; r++) {
    let t = now()
    const plain = await rawContainer()
    const c0 = now() - t
    t = now(); await plain.start(); record('plain container (bench baseline)', c0, now() - t)
    await plain.remove({ force: true })
    let i = 0
    for (const [k, variant] of Object.entries(VARIANTS)) {
      const o = variant({ ...base, name: `${PREFIX}-rawclone-a${r}-${i}`, HostConfig: { ...base.HostConfig, Mounts: base.HostConfig.Mounts?.map(m => m.Type === 'volume' ? { ...m, Source: `${PREFIX}-rawhome-a${r}-${i}` } : m) } })
      i++
      t = now()
      const box = await docker.createContainer(o)
      const c = now() - t
      t = now(); await box.start(); record(k, c, now() - t)
      await box.remove({ force: true, v: true })
    }
  }
  return [...times].map(([k, t]) => `    ${k}: create ${ms(median(t.create))}, start ${ms(median(t.start))}`)
}
