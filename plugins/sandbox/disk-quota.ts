import type { SandboxSettings } from './sandbox-spec.js'
import { isEngineFailure } from './engine-error.js'
import type { CoreBase } from './context.js'
import type { DiskUsage } from './types.js'

/*
 * The hard part of SANDBOX_DISK_LIMIT: a quota on the container's writable layer (`StorageOpt.size`)
 * where the storage driver enforces one. overlay2 does only on xfs mounted with pquota; btrfs, zfs,
 * devicemapper and windowsfilter do natively. The driver is read once at boot; when it may support
 * a quota, the first create tries it and a refusal turns it off for the life of the process. The
 * soft part (home volume + outputs + writable layer) is disk-watchdog.ts.
 */

/** off: no disk limit; unknown: not decided yet; try: create with a quota, fall back once if refused. */
export type QuotaSupport = 'off' | 'unknown' | 'try' | 'yes' | 'no'

/** The disk watchdog's view of one chat. */
export interface DiskState {
  /** last measurement over the limit, until one is under it again */
  over: { usage: DiskUsage, limit: number } | null
  /** when the watchdog last stopped the sandbox (ms), and the usage then */
  stoppedAt: number
  stoppedTotal: number
}

/** A create refused because of the writable-layer quota (the engine's storage has no quota support). */
export function isQuotaRefusal (err: unknown): boolean {
  return isEngineFailure(err) && err.reason === 'quota-refused'
}

/** Whether sandboxes get a writable-layer quota, decided at boot and by the first create. */
export interface DiskQuota {
  detectQuota: () => Promise<void>
  settingsWithQuota: () => SandboxSettings
  quotaOutcome: (ok: boolean, err?: unknown) => void
}

export function createDiskQuota (base: Pick<CoreBase, 'engine' | 'log' | 'opts' | 'settings'>): DiskQuota {
  const { engine, log, opts } = base
  let quota: QuotaSupport = opts.diskLimit > 0 ? 'unknown' : 'off'

  /** Reads the storage driver once (bootstrap); never throws. */
  async function detectQuota (): Promise<void> {
    if (quota !== 'unknown') return
    try {
      const { driver, backingFs, quota: supported } = await engine.storageInfo()
      quota = supported ? 'try' : 'no'
      log.info({ driver, backingFs, diskLimit: opts.diskLimit, writableLayerQuota: quota === 'try' ? 'trying' : 'unsupported' },
        quota === 'try'
          ? 'disk limit: writable-layer quota will be tried; /tmp is a sized tmpfs; the watchdog measures home, outputs and the writable layer'
          : 'disk limit: this storage driver has no writable-layer quota; /tmp is a sized tmpfs and the watchdog measures home, outputs and the writable layer')
    } catch (err) {
      log.warn({ err }, 'cannot read the storage driver; no writable-layer quota is used')
      quota = 'no'
    }
  }

  /** The container settings with the current quota decision. */
  function settingsWithQuota (): SandboxSettings {
    return { ...base.settings, storageQuota: quota === 'try' || quota === 'yes' }
  }

  /** Records the outcome of a create that carried a quota. */
  function quotaOutcome (ok: boolean, err?: unknown): void {
    if (quota !== 'try') return
    quota = ok ? 'yes' : 'no'
    if (ok) log.info({ diskLimit: opts.diskLimit }, 'disk limit: the writable layer of every sandbox has a hard quota')
    else log.warn({ err }, 'disk limit: the storage driver refused a writable-layer quota; sandboxes are created without one (the watchdog still applies)')
  }

  return { detectQuota, settingsWithQuota, quotaOutcome }
}
