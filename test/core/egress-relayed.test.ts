/*
 * EGRESS_PORT is hidden from the apps (listed and served) only where it is the agent's egress relay
 * (fastify.config.ts egressRelayed, docs/network.md#egress-over-the-agent-socket): with the Docker engine and
 * its agent socket. On Kubernetes, or with SANDBOX_AGENT_SOCKET=false, sandboxes keep the network path and
 * an app of theirs may listen on that port.
 */
import t from 'tap'
import { egressRelayed } from '../../fastify.config.js'
import { testConfig } from '../helper.js'

t.test('the egress relay\'s port is reserved only where the relay runs', async t => {
  t.equal(egressRelayed(testConfig({})), true, 'the defaults: Docker, agent socket, egress socket, network on')
  t.equal(egressRelayed(testConfig({ SANDBOX_ENGINE: 'kubernetes' })), false, 'Kubernetes: sandboxes on the network')
  t.equal(egressRelayed(testConfig({ SANDBOX_AGENT_SOCKET: 'false' })), false, 'no agent socket: no egress socket either')
  t.equal(egressRelayed(testConfig({ SANDBOX_AGENT: 'false' })), false, 'no agent')
  t.equal(egressRelayed(testConfig({ SANDBOX_EGRESS_SOCKET: 'false' })), false, 'egress over the network')
  t.equal(egressRelayed(testConfig({ ENABLE_NETWORK: 'false' })), false, 'no egress at all')
})
