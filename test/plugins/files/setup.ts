import { mkdirSync, mkdtempSync, rmSync, writeFileSync, utimesSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { entry } from '../../../core/app.js'
import { chatPaths } from '../../../core/chat-paths.js'
import capabilities from '../../../plugins/capabilities/index.js'
import files from '../../../plugins/files/index.js'
import chatStorage from '../../../plugins/chat-storage/index.js'
import { build, TEST_API_KEY } from '../../helper.js'

export const KEY = TEST_API_KEY

export interface FilesApp {
  app: FastifyInstance
  dataDir: string
  outputs: (chatId: string) => string
  /** Writes a file below the chat's outputs dir (parents created); optional mtime in Unix seconds. */
  put: (chatId: string, rel: string, content: string | Buffer, mtime?: number) => string
}

/** capabilities + files on a temp DATA_DIR; protected unless `open` is set. */
export async function filesApp (t: Test, env: Record<string, string> = {}, open = false): Promise<FilesApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'cubicle-files-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const app = await build(t, { DATA_DIR: dataDir, MCP_API_KEY: open ? '' : KEY, ...env }, config => [
    entry(capabilities, { apiKey: config.MCP_API_KEY, signingKey: config.LINK_SIGNING_KEY, tokenTtlSeconds: config.LINK_TOKEN_TTL, publicBaseUrl: config.publicBaseUrl }),
    entry(chatStorage, { dataDir: config.DATA_DIR }),
    entry(files, { archiveMaxBytes: config.ARCHIVE_MAX_BYTES, frameAncestors: config.FRAME_ANCESTORS })
  ])
  const outputs = (chatId: string): string => chatPaths(dataDir, chatId).outputs
  const put = (chatId: string, rel: string, content: string | Buffer, mtime?: number): string => {
    const abs = join(outputs(chatId), rel)
    mkdirSync(dirname(abs), { recursive: true })
    writeFileSync(abs, content)
    if (mtime !== undefined) utimesSync(abs, mtime, mtime)
    return abs
  }
  return { app, dataDir, outputs, put }
}

export const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })
