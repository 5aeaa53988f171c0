/*
 * The sandbox network is checked when it is found, never trusted by name: an operator's network that
 * lets sandboxes reach each other (or has a route out) refuses the boot with a message naming the
 * network and the setting; this server's own unsafe network is replaced when nothing uses it and
 * refused when something does. Real Docker.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { buildSandboxApp, cleanupPrefix, dockerOrSkip, TEST_IMAGE } from './docker.js'

const run = promisify(execFile)
const { skip } = await dockerOrSkip()
const ICC = 'com.docker.network.bridge.enable_icc'

async function docker (...args: string[]): Promise<string> {
  return (await run('docker', args)).stdout.trim()
}

async function networkInfo (name: string): Promise<{ Id: string, Internal: boolean, Options: Record<string, string> | null, Labels: Record<string, string> | null } | null> {
  try {
    return (JSON.parse(await docker('network', 'inspect', name)) as Array<{ Id: string, Internal: boolean, Options: Record<string, string> | null, Labels: Record<string, string> | null }>)[0] ?? null
  } catch { return null }
}

const ours = (prefix: string): string[] => ['--label', 'managed-by=computer-use-server', '--label', `cu.prefix=${prefix}`]

t.test('an operator\'s network with inter-sandbox traffic on refuses the boot, naming the network and the option', { skip }, async t => {
  const prefix = 'tnetop'
  const name = `${prefix}-sandboxes`
  await cleanupPrefix(t, prefix)
  await docker('network', 'rm', name).catch(() => '')
  await docker('network', 'create', '--internal', name)
  t.teardown(async () => { await docker('network', 'rm', name).catch(() => '') })
  const before = await networkInfo(name)
  await t.rejects(buildSandboxApp(t, prefix), {
    name: 'SandboxSetupRefused',
    message: new RegExp(`sandbox network '${name}' is not safe to use: sandboxes on it can reach each other \\(${ICC.replace(/\./g, '\\.')}=false is not set\\).*not created by this server.*left as it is`)
  })
  const after = await networkInfo(name)
  t.equal(after?.Id, before?.Id, 'the operator\'s network is left as it is')
})

t.test('an operator\'s network with a route out refuses the boot too', { skip }, async t => {
  const prefix = 'tnetout'
  const name = `${prefix}-sandboxes`
  await cleanupPrefix(t, prefix)
  await docker('network', 'rm', name).catch(() => '')
  await docker('network', 'create', '-o', `${ICC}=false`, name)
  t.teardown(async () => { await docker('network', 'rm', name).catch(() => '') })
  await t.rejects(buildSandboxApp(t, prefix), { message: new RegExp(`sandbox network '${name}' is not safe to use: it has a direct route out \\(it is not internal\\)`) })
})

t.test('this server\'s own network with inter-sandbox traffic on is replaced by an isolated one when unused', { skip }, async t => {
  const prefix = 'tnetown'
  const name = `${prefix}-sandboxes`
  await cleanupPrefix(t, prefix)
  await docker('network', 'create', '--internal', ...ours(prefix), name)
  const before = await networkInfo(name)
  t.not(before?.Options?.[ICC], 'false', 'created with inter-container traffic on')
  const { service } = await buildSandboxApp(t, prefix)
  const after = await networkInfo(name)
  t.not(after?.Id, before?.Id, 'the network was replaced')
  t.equal(after?.Options?.[ICC], 'false', 'the new one is isolated')
  t.equal(after?.Internal, true, 'and internal')
  t.equal(service.network()?.name, name, 'sandboxes use it')
})

t.test('this server\'s own unsafe network still in use is refused, saying so', { skip }, async t => {
  const prefix = 'tnetuse'
  const name = `${prefix}-sandboxes`
  await cleanupPrefix(t, prefix)
  await docker('network', 'create', '--internal', ...ours(prefix), name)
  await docker('run', '-d', '--name', `${prefix}-occupant`, '--label', `cu.prefix=${prefix}`, '--network', name, '--entrypoint', 'sleep', TEST_IMAGE, '600')
  t.teardown(async () => { await docker('rm', '-f', `${prefix}-occupant`).catch(() => '') })
  await t.rejects(buildSandboxApp(t, prefix), { message: new RegExp(`sandbox network '${name}' is not safe to use: sandboxes on it can reach each other .*this server's but still in use`) })
  t.ok(await networkInfo(name), 'the network in use is left as it is')
})
