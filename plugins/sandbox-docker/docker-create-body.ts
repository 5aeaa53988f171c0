import type { HostMount } from '../../core/storage-layout.js'
import type { SandboxSpec, TmpfsSpec } from '../sandbox/types.js'

/*
 * The Docker engine's reading of the neutral sandbox spec (engine-types.ts): the body of
 * `POST /containers/create`. Pure: same spec and mounts, same body (unit-tested field by field). The
 * mounts are the spec's storage mapped by the engine (core/storage-layout.ts hostMounts: the home
 * volume, bind mounts below DATA_DIR_HOST and SKILLS_DIR_HOST) plus the engine's own (the agent socket).
 */

export interface DockerMount { Type: 'bind' | 'volume', Source: string, Target: string, ReadOnly: boolean, VolumeOptions?: { Labels: Record<string, string> } }

export interface DockerCreateBody {
  name: string
  Image: string
  Cmd: string[]
  Hostname: string
  User: string
  WorkingDir: string
  Env: string[]
  Labels: Record<string, string>
  AttachStdin: false
  AttachStdout: false
  AttachStderr: false
  Tty: false
  OpenStdin: false
  HostConfig: Record<string, unknown> & { Mounts: DockerMount[], Tmpfs: Record<string, string>, StorageOpt?: { size: string } }
}

/** The spec's tmpfs mounts as Docker's mount option strings (writable, no setuid, no devices, executables allowed). */
export function tmpfsOptions (tmpfs: Record<string, TmpfsSpec>): Record<string, string> {
  return Object.fromEntries(Object.entries(tmpfs).map(([target, t]) => [target, `rw,nosuid,nodev,size=${t.size},mode=${t.mode.toString(8)}`]))
}

/** Docker's tmpfs option strings back as the contract's size and mode (an option it cannot read: 0). */
export function tmpfsFromOptions (options: Record<string, string> | null | undefined): Record<string, TmpfsSpec> {
  const out: Record<string, TmpfsSpec> = {}
  for (const [target, text] of Object.entries(options ?? {})) {
    let size = 0
    let mode = 0
    for (const part of String(text).slice(0, 1024).split(',')) {
      if (part.startsWith('size=')) size = Number.parseInt(part.slice(5), 10) || 0
      else if (part.startsWith('mode=')) mode = Number.parseInt(part.slice(5), 8) || 0
    }
    out[target] = { size, mode }
  }
  return out
}

export function dockerCreateBody (spec: SandboxSpec, mounts: HostMount[]): DockerCreateBody {
  const { limits, security } = spec
  return {
    name: spec.name,
    Image: spec.image,
    Cmd: spec.command,
    Hostname: spec.hostname,
    User: spec.user,
    WorkingDir: spec.workdir,
    Env: spec.env,
    Labels: spec.labels,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    Tty: false,
    OpenStdin: false,
    HostConfig: {
      Memory: limits.memory,
      // No swap: memory + swap = memory.
      MemorySwap: limits.memory,
      NanoCpus: Math.round(limits.cpus * 1e9),
      PidsLimit: limits.pids,
      SecurityOpt: security.noNewPrivileges ? ['no-new-privileges:true'] : [],
      CapDrop: security.dropCapabilities ? ['ALL'] : [],
      Privileged: false,
      Init: security.init,
      ShmSize: limits.shm,
      LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } },
      RestartPolicy: { Name: 'no' },
      NetworkMode: spec.network,
      ...(security.disableIpv6 ? { Sysctls: { 'net.ipv6.conf.all.disable_ipv6': '1' } } : {}),
      PublishAllPorts: false,
      Mounts: mounts.map(m => ({
        Type: m.type,
        Source: m.source,
        Target: m.target,
        ReadOnly: m.readOnly,
        // The home volume is made on first use with the labels the core asked for.
        ...(m.type === 'volume' && m.source === spec.storage.home.volume && { VolumeOptions: { Labels: spec.storage.home.labels } })
      })),
      Tmpfs: tmpfsOptions(spec.tmpfs),
      ...(limits.disk > 0 ? { StorageOpt: { size: String(limits.disk) } } : {})
    }
  }
}
