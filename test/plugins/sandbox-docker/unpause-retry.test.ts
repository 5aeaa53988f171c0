/*
 * runc can refuse an unpause right after a pause ("cannot resume a running process": the cgroup's freeze
 * has not settled) while Docker still reports the container paused. The Docker engine asks again shortly
 * after; over a fake Docker API on loopback (pure logic: the real race is rare and timing-bound).
 */
import t, { type Test } from 'tap'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createDockerEngine } from '../../../plugins/sandbox-docker/docker-client.js'

async function fakeDocker (t: Test, refusals: number): Promise<{ host: string, unpauses: () => number }> {
  let n = 0
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume()
    if (req.method === 'POST' && /\/containers\/box\/unpause$/.test(req.url ?? '')) {
      n++
      if (n <= refusals) {
        res.writeHead(500, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ message: 'Cannot unpause container box: cannot resume a running process: unknown' }))
        return
      }
      res.writeHead(204)
      res.end()
      return
    }
    res.writeHead(404, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ message: `no route ${req.method ?? ''} ${req.url ?? ''}` }))
  })
  await new Promise<void>(resolve => { server.listen(0, '127.0.0.1', resolve) })
  t.teardown(async () => { server.closeAllConnections(); await new Promise(resolve => server.close(resolve)) })
  return { host: `tcp://127.0.0.1:${(server.address() as AddressInfo).port}`, unpauses: () => n }
}

t.test('an unpause refused while the freeze settles is asked again', async t => {
  const docker = await fakeDocker(t, 2)
  const engine = createDockerEngine(docker.host)
  t.teardown(() => { engine.close() })
  await engine.unpause('box')
  t.equal(docker.unpauses(), 3, 'two refusals, then done')
})

t.test('a refusal that persists fails after five tries', async t => {
  const docker = await fakeDocker(t, 100)
  const engine = createDockerEngine(docker.host)
  t.teardown(() => { engine.close() })
  await t.rejects(engine.unpause('box'), /cannot resume a running process/)
  t.equal(docker.unpauses(), 5)
})
