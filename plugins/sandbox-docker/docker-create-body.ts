import type { SandboxSpec } from '../sandbox/types.js'

/*
 * The Docker engine's reading of the neutral sandbox spec (engine-types.ts): the body of
 * `POST /containers/create`. Pure: same spec, same body (unit-tested field by field).
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

export function dockerCreateBody (spec: SandboxSpec): DockerCreateBody {
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
      Mounts: spec.mounts.map(m => ({
        Type: m.type,
        Source: m.source,
        Target: m.target,
        ReadOnly: m.readOnly,
        ...(m.volumeLabels !== undefined && { VolumeOptions: { Labels: m.volumeLabels } })
      })),
      Tmpfs: spec.tmpfs,
      ...(limits.disk > 0 ? { StorageOpt: { size: String(limits.disk) } } : {})
    }
  }
}
