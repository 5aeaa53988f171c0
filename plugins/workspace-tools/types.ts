import type { LinkService } from '../capabilities/types.js'
import type { SandboxService } from '../sandbox/types.js'

/** What the four workspace tools need from the rest of the server (decorated services, passed in). */
export interface WorkspaceDeps {
  sandbox: SandboxService
  links: LinkService
  /** The server-side path of a chat's outputs directory (bind-mounted at /mnt/user-data/outputs). */
  outputsDir: (chatId: string) => string
}

/** The plugin's options after parseOptions. */
export interface WorkspaceSettings {
  commandTimeoutS: number
  createTimeoutS: number
  maxOutputChars: number
  progressIntervalS: number
}
