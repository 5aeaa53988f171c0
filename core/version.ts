import { readFileSync } from 'node:fs'

/** The server's one version string (package.json): serverInfo, /mcp-info and the docs page all use it. */
export const SERVER_VERSION: string = (() => {
  // core/version.ts runs from the source tree (tsx) or from dist/core (the build's bundle): package.json is one or two levels up.
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string, version?: string }
      if (pkg.name === 'cubicle' && typeof pkg.version === 'string') return pkg.version
    } catch {}
  }
  return '0.0.0'
})()

export const SERVER_NAME = 'computer-use-mcp'
