/*
 * The in-memory engine against the shared engine contract (test/fixtures/engine-contract.ts), the
 * same suite the Docker engine passes (engine-docker.test.ts): no Docker needed.
 */
import t from 'tap'
import { createMemoryEngine } from '../../../plugins/sandbox-memory/memory-engine.js'
import { engineContract } from '../../fixtures/engine-contract.js'

const IMAGE = 'cubicle-memory-test:latest'

t.test('the in-memory engine passes the engine contract', async t => {
  await engineContract(t, {
    engine: ({ dataDir, skillsDir }) => createMemoryEngine({ images: [IMAGE], dataDir, skillsDir }),
    unreachable: () => createMemoryEngine({ images: [IMAGE], reachable: false }),
    image: IMAGE,
    prefix: 'tengmem'
  })
})
