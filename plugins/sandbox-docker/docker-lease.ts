import type Docker from 'dockerode'
import tar from 'tar-stream'
import { labelTime, labelValue, timeOfLabel } from '../../core/label-value.js'
import type { AdapterContext } from './docker-context.js'
import type { DockerError } from './docker-error.js'
import type { LeaseHolder, LeaseRecord, SandboxEngine } from '../sandbox/types.js'

/*
 * Leases on Docker (engine-types.ts acquireLease): a lock container, created and never started, whose
 * name is the lease's name, so that only one create can win (409 for every other). Its labels name the
 * holder; its renewals are a small file written into it (the archive API works on a container that
 * never ran). Renewal and release act on the container's id, so an instance that lost its lease to a
 * takeover cannot touch the new holder's.
 */

type LeaseCalls = Pick<SandboxEngine, 'acquireLease' | 'renewLease' | 'breakLease'>

const RENEWAL_FILE = '/cubicle-lease.json'
const HOLDER = { id: 'cu.lease-holder', host: 'cu.lease-host', pid: 'cu.lease-pid', startedAt: 'cu.lease-started-at' } as const

/**
 * The holder as labels, each a valid Kubernetes label value (docs/engine.md#labels): the start time in
 * labelTime's basic form (RFC 3339's ':' is not allowed), the rest through labelValue.
 */
export function holderLabels (holder: LeaseHolder): Record<string, string> {
  const started = Date.parse(holder.startedAt)
  return {
    [HOLDER.id]: labelValue(holder.id),
    [HOLDER.host]: labelValue(holder.host),
    [HOLDER.pid]: String(holder.pid),
    [HOLDER.startedAt]: Number.isFinite(started) ? labelTime(new Date(started)) : labelValue(holder.startedAt)
  }
}

/** The holder read back from the labels; a start time in the extended form of earlier versions is read too. */
export function holderOf (l: Record<string, string>): LeaseHolder {
  return { id: l[HOLDER.id] ?? '', host: l[HOLDER.host] ?? '', pid: Number(l[HOLDER.pid] ?? 0), startedAt: timeOfLabel(l[HOLDER.startedAt] ?? '') }
}
/** The renewal file is a few bytes; anything larger is not ours. */
const MAX_READ = 64 * 1024

const status = (err: unknown): number | undefined => (err as DockerError).statusCode

/** The renewal time in the container's file, or null when it has none (yet) or it does not parse. */
async function readRenewal (stream: NodeJS.ReadableStream): Promise<number | null> {
  return await new Promise((resolve, reject) => {
    const extract = tar.extract()
    let found: number | null = null
    extract.on('entry', (header, body, next) => {
      const chunks: Buffer[] = []
      let size = 0
      body.on('data', (c: unknown) => { const b = c as Buffer; size += b.length; if (size <= MAX_READ) chunks.push(b) })
      body.on('end', () => {
        if (found === null && header.type === 'file' && size <= MAX_READ) {
          try {
            const v = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { renewedAt?: unknown }).renewedAt
            if (typeof v === 'number' && Number.isFinite(v)) found = v
          } catch { /* not ours: no renewal */ }
        }
        next()
      })
      body.resume()
    })
    extract.on('finish', () => resolve(found))
    extract.on('error', reject)
    stream.on('error', reject)
    stream.pipe(extract)
  })
}

export function leaseCalls ({ docker, run }: AdapterContext, putFile: SandboxEngine['putFile']): LeaseCalls {
  const write = async (id: string, at: number): Promise<void> => {
    await putFile(id, RENEWAL_FILE, Buffer.from(JSON.stringify({ renewedAt: at })), 0o644, 0, 0)
  }

  const read = async (name: string): Promise<LeaseRecord | null> => {
    let info: Docker.ContainerInspectInfo
    try {
      info = await run('read', 'lease inspect', async s => await docker.getContainer(name).inspect({ abortSignal: s }), { retry: true })
    } catch (err) {
      if (status(err) === 404) return null
      throw err
    }
    const holder = holderOf(info.Config.Labels ?? {})
    let renewedAt: number | null = null
    try {
      const stream = await run('read', 'lease read', async s => await docker.getContainer(info.Id).getArchive({ path: RENEWAL_FILE, abortSignal: s } as { path: string }), { retry: true })
      renewedAt = await readRenewal(stream)
    } catch (err) {
      if (status(err) !== 404) throw err
    }
    // Created but not renewed yet (its holder is between the create and the first write): the create counts.
    return { holder, renewedAt: renewedAt ?? Date.parse(info.Created), token: info.Id }
  }

  return {
    async acquireLease (name, holder, o) {
      let id: string
      try {
        const c = await run('lifecycle', 'lease create', async s => await docker.createContainer({
          name,
          Image: o.image,
          Entrypoint: ['true'],
          Cmd: [],
          Labels: { ...o.labels, ...holderLabels(holder) },
          NetworkDisabled: true,
          HostConfig: { NetworkMode: 'none' },
          abortSignal: s
        } as Docker.ContainerCreateOptions))
        id = c.id
      } catch (err) {
        if (status(err) !== 409) throw err
        return { acquired: false, current: await read(name) }
      }
      await write(id, o.now)
      return { acquired: true, token: id }
    },

    async renewLease (token, at) {
      try {
        await write(token, at)
        return true
      } catch (err) {
        if ((err as DockerError).reason === 'no-such-sandbox') return false
        throw err
      }
    },

    async breakLease (token) {
      try {
        await run('lifecycle', 'lease remove', async s => await docker.getContainer(token).remove({ force: true, v: true, abortSignal: s }), { retry: true })
      } catch (err) {
        const e = err as DockerError
        if (e.statusCode === 404 || (e.statusCode === 409 && /in progress/i.test(e.message))) return
        throw e
      }
    }
  }
}
