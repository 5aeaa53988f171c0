// The Docker engine's appAddress (plugins/sandbox-docker/docker-address.ts) over inspect data: a running
// container's address on the sandbox network, only where the server reaches that network, with a generation
// that changes with every new endpoint (a start, a reconnect).
import t from 'tap'
import type Docker from 'dockerode'
import { addressOf, localAddresses } from '../../../plugins/sandbox-docker/docker-address.js'

type Info = Pick<Docker.ContainerInspectInfo, 'Id' | 'State' | 'NetworkSettings'>

const info = (state: Partial<Docker.ContainerInspectInfo['State']>, endpoint: Record<string, string> | undefined): Info => ({
  Id: 'c0ffee',
  State: { Running: true, Paused: false, Restarting: false, ...state } as Docker.ContainerInspectInfo['State'],
  NetworkSettings: { Networks: endpoint === undefined ? {} : { 'cu-sandboxes': endpoint } } as unknown as Docker.ContainerInspectInfo['NetworkSettings']
})
const EP = { IPAddress: '172.30.0.5', EndpointID: 'e1', Gateway: '172.30.0.1' }
const local = (a: string): boolean => a === '172.30.0.1'

t.test('a running container\'s address on the sandbox network, with the container and endpoint as its generation', async t => {
  t.same(addressOf(info({}, EP), 'cu-sandboxes', local), { address: '172.30.0.5', generation: 'c0ffee/e1' })
  t.not(addressOf(info({}, { ...EP, EndpointID: 'e2' }), 'cu-sandboxes', local)?.generation, 'c0ffee/e1', 'a new endpoint (a start, a reconnect) is another generation, even on the same address')
})

t.test('none when not running, paused, restarting, not on the network, or the server is not on the network\'s host', async t => {
  t.equal(addressOf(info({ Running: false }, EP), 'cu-sandboxes', local), null, 'stopped')
  t.equal(addressOf(info({ Paused: true }, EP), 'cu-sandboxes', local), null, 'paused: the core wakes it first')
  t.equal(addressOf(info({ Restarting: true }, EP), 'cu-sandboxes', local), null, 'restarting')
  t.equal(addressOf(info({}, undefined), 'cu-sandboxes', local), null, 'no endpoint on the network (network none)')
  t.equal(addressOf(info({}, EP), 'other-net', local), null, 'another network')
  t.equal(addressOf(info({}, { ...EP, IPAddress: '' }), 'cu-sandboxes', local), null, 'no address')
  t.equal(addressOf(info({}, { ...EP, EndpointID: '' }), 'cu-sandboxes', local), null, 'no endpoint id')
  t.equal(addressOf(info({}, { ...EP, Gateway: '10.9.9.1' }), 'cu-sandboxes', local), null, 'the gateway is not this host\'s: the server cannot reach the bridge')
})

t.test('the host\'s own addresses are read again after 10 s', async t => {
  let clock = 0
  let reads = 0
  let addresses = ['172.30.0.1']
  const isLocal = localAddresses(() => { reads++; return { br0: addresses.map(address => ({ address })) } as never }, () => clock)
  t.ok(isLocal('172.30.0.1'))
  t.notOk(isLocal('172.30.0.9'))
  t.equal(reads, 1, 'read once')
  addresses = ['172.31.0.1']
  clock = 10_001
  t.notOk(isLocal('172.30.0.1'), 'read again: the old address is gone')
  t.ok(isLocal('172.31.0.1'))
  t.equal(reads, 2)
})
