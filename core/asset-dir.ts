import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/**
 * The directory `plugins/<plugin>/<dir>/` of files a plugin serves as they are (its front end, its
 * icons): beside the module under tsx, or the source tree's copy when the server runs from dist/
 * (the build bundles no assets; the Dockerfile copies them): the bundle's modules are in dist/core/
 * (docs/architecture.md#the-build), a module compiled on its own would be in dist/plugins/<plugin>/.
 * `moduleUrl` is the plugin's `import.meta.url`.
 */
export function assetDir (moduleUrl: string, plugin: string, dir: string): string {
  for (const rel of [`./${dir}/`, `../../plugins/${plugin}/${dir}/`, `../../../plugins/${plugin}/${dir}/`]) {
    const path = fileURLToPath(new URL(rel, moduleUrl))
    if (existsSync(path)) return path
  }
  throw new Error(`${plugin}: directory plugins/${plugin}/${dir} not found`)
}
