import { isAbsolute, relative, sep } from 'node:path'
import { SANDBOX_HOME, SANDBOX_OUTPUTS, SANDBOX_SKILLS, SANDBOX_UPLOADS } from '../../core/chat-paths.js'
import { areaDirs } from '../../core/storage-layout.js'
import type { SandboxStorage, StorageSeen } from '../sandbox/types.js'
import { KubeError } from './kube-error.js'
import type { ClaimMount } from './kube-objects.js'

/*
 * The neutral storage request (docs/engine.md#storage) on Kubernetes: the home is the chat's own
 * PersistentVolumeClaim; everything the server keeps as files (the chats' uploads and outputs below
 * DATA_DIR, SKILLS_DIR, the user-skills cache) is on one shared claim (KUBE_SHARED_CLAIM, ReadWriteMany:
 * NFS, CephFS, EFS, …) that the server mounts at `root` (its DATA_DIR) and that sandboxes mount by
 * subPath: uploads read-only, outputs writable, skills and extension mounts read-only. So the server and
 * the pods may run on different nodes, chat-storage reads the same files, and no host path is used.
 */

export interface SharedStorage {
  /** the ReadWriteMany claim ('' = none: a sandbox's data areas cannot be mounted) */
  claim: string
  /** where the server mounts it */
  root: string
  /** the chats' areas (DATA_DIR), below root */
  dataDir: string
  /** the built-in skills (SKILLS_DIR), below root; '' = none (the image's own) */
  skillsDir: string
}

/** `path` as a subPath of the shared claim, or undefined when it is not below its root. */
function subPathOf (shared: SharedStorage, path: string): string | undefined {
  const rel = relative(shared.root, path)
  if (rel.startsWith('..') || isAbsolute(rel)) return undefined
  return rel.split(sep).join('/')
}

function needShared (shared: SharedStorage | undefined, what: string): SharedStorage {
  if (shared === undefined || shared.claim === '') throw new KubeError(`the Kubernetes engine mounts ${what} from a shared volume: set KUBE_SHARED_CLAIM to a ReadWriteMany PersistentVolumeClaim that the server mounts at DATA_DIR (docs/engine.md#kubernetes)`)
  return shared
}

/** Whether the engine has skills to mount (SKILLS_DIR on the shared claim). */
export function hasSkills (shared: SharedStorage | undefined): boolean {
  return shared !== undefined && shared.claim !== '' && shared.skillsDir !== '' && subPathOf(shared, shared.skillsDir) !== undefined
}

/** The claims a sandbox mounts for its storage; throws what cannot be mapped. */
export function claimMounts (storage: SandboxStorage, shared: SharedStorage | undefined): ClaimMount[] {
  const mounts: ClaimMount[] = [{ claim: storage.home.volume, target: SANDBOX_HOME, readOnly: false }]
  const s = needShared(shared, 'the chat\'s uploads and outputs')
  const dirs = areaDirs(s.dataDir, storage.data)
  const uploads = subPathOf(s, dirs.uploads)
  const outputs = subPathOf(s, dirs.outputs)
  if (uploads === undefined || outputs === undefined) throw new KubeError(`DATA_DIR (${s.dataDir}) is not below the shared claim's mount (${s.root})`)
  mounts.push({ claim: s.claim, subPath: uploads, target: SANDBOX_UPLOADS, readOnly: true })
  mounts.push({ claim: s.claim, subPath: outputs, target: SANDBOX_OUTPUTS, readOnly: false })
  if (storage.skills && hasSkills(s)) mounts.push({ claim: s.claim, subPath: subPathOf(s, s.skillsDir), target: SANDBOX_SKILLS, readOnly: true })
  for (const m of storage.extra) {
    const sub = subPathOf(s, m.source)
    if (sub === undefined) throw new KubeError(`the Kubernetes engine cannot mount ${m.source.slice(0, 200)} at ${m.target}: only directories on the shared claim (below ${s.root}) reach a pod`)
    mounts.push({ claim: s.claim, subPath: sub, target: m.target, readOnly: true })
  }
  return mounts
}

/** The storage of a sandbox created from `storage` on shared claim `claimThen`, as seen with the engine's settings now. */
export function storageSeen (storage: SandboxStorage, claimThen: string, shared: SharedStorage | undefined): StorageSeen {
  const same = shared !== undefined && shared.claim === claimThen
  return {
    home: storage.home.volume,
    data: same ? { ...storage.data } : null,
    skills: hasSkills(shared) ? storage.skills : null,
    extra: storage.extra.map(m => ({ ...m }))
  }
}
