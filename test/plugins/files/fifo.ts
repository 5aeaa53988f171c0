import { execFileSync } from 'node:child_process'

/** Node has no mkfifo; coreutils does. */
export function mkfifoSync (path: string): void {
  execFileSync('mkfifo', [path])
}
