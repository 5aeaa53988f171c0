// slim leaves codex out for its size; a server configured for a CLI its image lacks gets told which image has it.
import t from 'tap'
import { CLIS, missingCliHint } from '../../../plugins/sub-agent/cli.js'

t.test('codex is not in slim: the hint names the agents image, how to build it and how to select it', async t => {
  t.equal(CLIS.codex.inSlim, false)
  const hint = missingCliHint('codex')
  t.match(hint, '`codex` is not in the default slim image')
  t.match(hint, 'bash sandbox-image/build.sh --target agents --tag computer-use-sandbox:agents')
  t.match(hint, 'DOCKER_IMAGE=computer-use-sandbox:agents')
  t.match(hint, 'SUBAGENT_CLI=claude or opencode', 'the CLIs slim has are offered instead')
})

t.test('claude and opencode are in every target: the hint says to rebuild the image', async t => {
  for (const cli of ['claude', 'opencode'] as const) {
    t.equal(CLIS[cli].inSlim, true, `${cli} is in slim`)
    const hint = missingCliHint(cli)
    t.match(hint, `every target of sandbox-image/build.sh (slim, agents, full) installs \`${cli}\``)
    t.notMatch(hint, '--target agents')
  }
})
