import type { LinkService } from '../capabilities/types.js'
import type { SandboxService } from '../sandbox/types.js'
import type { ChatStorageService } from '../chat-storage/types.js'

/** What the four workspace tools need from the rest of the server (decorated services, passed in). */
export interface WorkspaceDeps {
  sandbox: SandboxService
  links: LinkService
  /** The chat's outputs (bind-mounted at /mnt/user-data/outputs), walked by descriptor for the result links. */
  storage: Pick<ChatStorageService, 'walk'>
}

/** The plugin's options after parseOptions. */
export interface WorkspaceSettings {
  commandTimeoutS: number
  createTimeoutS: number
  maxOutputChars: number
  progressIntervalS: number
}
