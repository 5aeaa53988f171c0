import t from 'tap'
import http from 'node:http'
import https from 'node:https'
import { inspect } from 'node:util'
import { createAgent, parseDockerHost } from '../../../plugins/sandbox-docker/docker-endpoint.js'

t.test('the connection pool prints as a name, so docker-modem\'s per-request util.inspect does not walk its sockets', async t => {
  const agent = createAgent(parseDockerHost('unix:///var/run/docker.sock'))
  t.teardown(() => agent?.destroy())
  t.ok(agent instanceof http.Agent)
  // docker-modem's exact call (lib/modem.js buildRequest), on options that carry the agent
  t.equal(inspect({ agent }, { showHidden: true, depth: null }), '{ agent: DockerAgent }')
  const tls = createAgent(parseDockerHost('https://docker.internal'))
  t.teardown(() => tls?.destroy())
  t.ok(tls instanceof https.Agent)
  t.equal(inspect(tls, { showHidden: true, depth: null }), 'DockerAgent')
  t.equal(createAgent(parseDockerHost('ssh://me@host')), undefined, 'ssh brings its own agent')
})
