import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/**
 * The directory `plugins/<plugin>/<dir>/` of files a plugin serves as they are (its front end, its
 * icons): beside the module under tsx, or the source tree's copy when the server runs from dist/
 * (tsc compiles no assets; the Dockerfile copies them). `moduleUrl` is the plugin's `import.meta.url`.
 */
export function assetDir (moduleUrl: string, plugin: string, dir: string): string {
  const here = fileURLToPath(new URL(`./${dir}/`, moduleUrl))
  if (existsSync(here)) return here
  const fromDist = fileURLToPath(new URL(`../../../plugins/${plugin}/${dir}/`, moduleUrl))
  if (existsSync(fromDist)) return fromDist
  throw new Error(`${plugin}: directory plugins/${plugin}/${dir} not found`)
}
