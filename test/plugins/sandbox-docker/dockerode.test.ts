import t from 'tap'
import http from 'node:http'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DEFERRED, deferModule, Dockerode } from '../../../plugins/sandbox-docker/dockerode.js'

const require = createRequire(import.meta.url)
const loaded = (part: string): boolean => Object.keys(require.cache).some(file => file.includes(part))

t.test('the dockerode client loads without ssh2 and gRPC until they are used', async t => {
  t.equal(DEFERRED.length, 2)
  const docker = new Dockerode({ socketPath: '/nonexistent/docker.sock' })
  t.ok(docker.modem !== undefined, 'the client is built')
  t.notOk(loaded('/node_modules/ssh2/'), 'ssh2 is not loaded')
  t.notOk(loaded('/node_modules/@grpc/'), 'gRPC is not loaded')
  t.notOk(loaded('/node_modules/protobufjs/'), 'protobufjs is not loaded')

  // docker-modem calls its ssh module once per request of an ssh:// client: the real one loads then.
  const ssh = require(DEFERRED[1] as string) as (opt: object) => http.Agent
  const agent = ssh({ host: '127.0.0.1', port: 1 })
  t.ok(agent instanceof http.Agent, 'the real ssh transport answers through the stand-in')
  t.ok(loaded('/node_modules/ssh2/'), 'ssh2 is loaded at the first call')
  t.equal(ssh({ host: '127.0.0.1', port: 1 }).constructor, http.Agent, 'and again on later calls')
  agent.destroy()
})

t.test('deferModule leaves loaded and absent modules alone and checks what it loads', async t => {
  const dir = mkdtempSync(join(tmpdir(), 'defer-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  t.equal(deferModule(join(dir, 'absent.js')), false, 'absent: not deferred')
  const loadedFile = require.resolve('dockerode')
  t.equal(deferModule(loadedFile), false, 'loaded already: not deferred')

  const fn = join(dir, 'fn.cjs')
  writeFileSync(fn, 'module.exports = function (a, b) { return a + b + (this === undefined ? 0 : this.k) }\n')
  t.equal(deferModule(fn), true)
  const stand = require(fn) as (this: unknown, a: number, b: number) => number
  t.equal(stand.call({ k: 10 }, 1, 2), 13, 'arguments and this pass through')

  const obj = join(dir, 'obj.cjs')
  writeFileSync(obj, 'module.exports = { not: "a function" }\n')
  t.equal(deferModule(obj), true)
  const bad = require(obj) as () => unknown
  t.throws(() => bad(), /does not export a function/)
})
