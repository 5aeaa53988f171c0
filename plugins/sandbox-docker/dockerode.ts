import { existsSync } from 'node:fs'
import { createRequire, Module } from 'node:module'
import { dirname, join } from 'node:path'
import type Docker from 'dockerode'

/*
 * dockerode's constructor, loaded without two parts of it that a server talking to a local daemon
 * never calls: docker-modem's ssh transport (ssh2, whose poly1305 WebAssembly module reserves 16 MiB
 * of external memory and keeps about 3 MiB resident) and dockerode's BuildKit session (gRPC and
 * protobufjs, about 150 modules). Both are loaded at the top of their packages, so each is put in the
 * CommonJS cache first as a function that loads the real module at its first call: DOCKER_HOST=ssh://…
 * and BuildKit builds work as before, they only pay for the module then (docs/performance.md).
 */

const require = createRequire(import.meta.url)

type Fn = (this: unknown, ...args: unknown[]) => unknown

/** Puts a stand-in for the CommonJS module `file` (which exports one function) in the cache; false if it is loaded already or absent. */
export function deferModule (file: string): boolean {
  if (require.cache[file] !== undefined || !existsSync(file)) return false
  let real: Fn | undefined
  const stub = new Module(file)
  stub.filename = file
  stub.loaded = true
  stub.exports = function deferred (this: unknown, ...args: unknown[]): unknown {
    if (real === undefined) {
      if (require.cache[file] === stub) delete require.cache[file]
      const loaded: unknown = require(file)
      if (typeof loaded !== 'function') throw new Error(`${file} does not export a function`)
      real = loaded as Fn
    }
    return real.apply(this, args)
  }
  require.cache[file] = stub
  return true
}

const main = require.resolve('dockerode')
/** The files deferred (docker-modem as dockerode itself resolves it). */
export const DEFERRED = [join(dirname(main), 'session.js'), join(dirname(createRequire(main).resolve('docker-modem')), 'ssh.js')]
for (const file of DEFERRED) deferModule(file)

export const Dockerode = require('dockerode') as typeof Docker
