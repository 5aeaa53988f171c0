/*
 * Headless n8n for the n8n integration test (n8n.test.ts): the install gate and a throwaway n8n
 * user folder. scripts/n8n-install.sh installs n8n 2.41.1 on Node 24 from the npm registry into
 * a cache; the gate skips loudly when that fails (even under REQUIRE_DOCKER=1: the install needs the
 * registry, not the engine), and a test fails when n8n is installed and the call fails.
 */
import type { Test } from 'tap'
import { execFile, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { freePort } from '../helper.js'
import { dockerOrSkip } from './docker.js'

const run = promisify(execFile)
export const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/** The n8n home (bin/n8n) when Docker answers and n8n is installed, else the reason to skip. */
export async function n8nOrSkip (): Promise<{ skip: string | false, home: string }> {
  const gate = await dockerOrSkip()
  if (gate.skip !== false) return { skip: gate.skip, home: '' }
  const install = spawnSync('bash', ['scripts/n8n-install.sh'], { cwd: ROOT, encoding: 'utf8', timeout: 3600_000 })
  if (install.status === 0) return { skip: false, home: install.stdout.trim().split('\n').pop() ?? '' }
  const tail = (install.stderr ?? '').trim().split('\n').slice(-3).join(' | ')
  return { skip: `SKIPPED: n8n could not be installed (scripts/n8n-install.sh): ${tail}`, home: '' }
}

export interface N8nUser {
  /** The environment every n8n command of this user folder runs with. */
  env: Record<string, string>
  /** Runs the n8n CLI in this user folder; resolves with stdout, rejects when n8n exits non-zero. */
  n8n: (...args: string[]) => Promise<string>
  /**
   * Copies files of integrations/n8n into the work dir the way a user edits them (`edits`: literal
   * replacements applied to every file) and imports them: credentials first, then workflows.
   */
  importFiles: (files: { credentials: string[], workflows: string[] }, edits: Array<[string, string]>) => Promise<void>
}

/**
 * A fresh n8n user folder under `work` (its own sqlite database and encryption key), and its own task
 * broker port: every n8n command starts a broker (5679 by default), and another checkout's n8n may run at once.
 */
export async function n8nUser (t: Test, home: string, work: string): Promise<N8nUser> {
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: work,
    N8N_USER_FOLDER: join(work, 'home'),
    N8N_ENCRYPTION_KEY: randomBytes(16).toString('hex'),
    N8N_DIAGNOSTICS_ENABLED: 'false',
    N8N_RUNNERS_ENABLED: 'false',
    N8N_RUNNERS_BROKER_PORT: String(await freePort())
  }
  const n8n = async (...args: string[]): Promise<string> =>
    (await run(join(home, 'bin/n8n'), args, { env, maxBuffer: 32 * 1024 * 1024, timeout: 300_000 })).stdout

  async function edited (name: string, edits: Array<[string, string]>): Promise<string> {
    let text = await readFile(join(ROOT, 'integrations/n8n', name), 'utf8')
    for (const [from, to] of edits) text = text.replaceAll(from, to)
    return text
  }

  async function importFiles (files: { credentials: string[], workflows: string[] }, edits: Array<[string, string]>): Promise<void> {
    // One CLI start per kind (each start costs seconds): the credential files (arrays) are joined into
    // one array; the workflow files (one object each) are imported from a directory with --separate.
    const credentials: unknown[] = []
    for (const name of files.credentials) credentials.push(...JSON.parse(await edited(name, edits)) as unknown[])
    await writeFile(join(work, 'credentials.json'), JSON.stringify(credentials))
    await mkdir(join(work, 'workflows'), { recursive: true })
    for (const name of files.workflows) await writeFile(join(work, 'workflows', name), await edited(name, edits))
    t.match(await n8n('import:credentials', `--input=${join(work, 'credentials.json')}`),
      new RegExp(`Successfully imported ${credentials.length} credential`), 'n8n imported the credentials')
    t.match(await n8n('import:workflow', '--separate', `--input=${join(work, 'workflows')}`),
      new RegExp(`Successfully imported ${files.workflows.length} workflow`), 'n8n imported the workflows')
  }

  return { env, n8n, importFiles }
}
