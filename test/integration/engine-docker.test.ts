/*
 * The Docker engine against the shared engine contract (engine-contract.ts; docs/contract.md#engines): what the
 * sandbox core relies on, on the real engine. Skips loudly without Docker; REQUIRE_DOCKER=1 fails.
 */
import t from 'tap'
import { createDockerEngine } from '../../plugins/sandbox-docker/docker-client.js'
import { engineContract } from '../fixtures/engine-contract.js'
import { cleanupPrefix, DOCKER_HOST, dockerOrSkip, TEST_IMAGE } from './docker.js'

const PREFIX = 'tengdock'
const { skip } = await dockerOrSkip()

t.test('the Docker engine passes the engine contract', { skip }, async t => {
  await cleanupPrefix(t, PREFIX)
  await engineContract(t, {
    engine: ({ dataDir, skillsDir }) => createDockerEngine(DOCKER_HOST, {}, undefined, { data: dataDir, skills: skillsDir, local: dataDir }),
    unreachable: () => createDockerEngine('unix:///tmp/cubicle-no-such-docker.sock'),
    image: TEST_IMAGE,
    prefix: PREFIX
  })
})
