import t from 'tap'
import { addressSet } from '../../../plugins/egress/addresses.js'
import { combine, parseLayer, parseUserDefaults, userDefault } from '../../../plugins/egress/layers.js'
import { decide } from '../../../plugins/egress/policy.js'
import { parseRules } from '../../../plugins/egress/rules.js'

// per-user defaults and their precedence (chat override > user default > server), as pure functions.

const server = { mode: 'open' as const, rules: parseRules('mirror.corp:3141') }
const USERS = parseUserDefaults({
  'Alice@Example.com': { mode: 'allowlist', allow: ['pypi.org', '*.pythonhosted.org'] },
  '@example.com': { mode: 'off' },
  'bob@other.org': { allow: ['10.1.0.0/16:5432'] }
})

t.test('a user default is found by exact email (case-insensitive), else by @domain', async t => {
  t.same(userDefault(USERS, 'alice@example.com')?.layer, { mode: 'allowlist', allow: ['pypi.org', '*.pythonhosted.org'] })
  t.same(userDefault(USERS, 'ALICE@EXAMPLE.COM')?.layer.mode, 'allowlist')
  t.same(userDefault(USERS, 'carol@example.com')?.layer, { mode: 'off', allow: [] }, 'the domain entry')
  t.equal(userDefault(USERS, 'carol@sub.example.com'), null, 'a domain entry is not a suffix match')
  t.equal(userDefault(USERS, 'dave@nowhere.net'), null)
  t.equal(userDefault(USERS, undefined), null, 'no email, no default')
})

t.test('the mode comes from the chat override, else the user default, else the server; rules add up', async t => {
  const alice = userDefault(USERS, 'alice@example.com')
  const bob = userDefault(USERS, 'bob@other.org')
  t.match(combine(server, null, null), { mode: 'open', source: 'server' })
  t.match(combine(server, alice, null), { mode: 'allowlist', source: 'user' })
  t.match(combine(server, bob, null), { mode: 'open', source: 'server' }, 'a user entry without a mode keeps the server mode')
  const chatOpen = parseLayer({ mode: 'open', allow: ['example.net'] }, 'chat')
  t.match(combine(server, alice, chatOpen), { mode: 'open', source: 'chat' }, 'the chat override wins')
  const chatRulesOnly = parseLayer({ allow: ['example.net'] }, 'chat')
  const layered = combine(server, alice, chatRulesOnly)
  t.match(layered, { mode: 'allowlist', source: 'user' }, 'an override without a mode keeps the user mode')
  t.same(layered.rules.map(r => r.text), ['mirror.corp:3141', 'pypi.org', '*.pythonhosted.org', 'example.net'], 'server, user, chat rules in order')
})

t.test('the layered policy decides connections: a user allowlist admits its names only', async t => {
  const policy = { ...combine(server, userDefault(USERS, 'alice@example.com'), null), hostAddresses: addressSet([]) }
  t.match(decide(policy, { host: 'pypi.org', port: 443 }, '151.101.0.223'), { allow: true, reason: 'name-rule', rule: 'pypi.org' })
  t.match(decide(policy, { host: 'files.pythonhosted.org', port: 443 }, '151.101.0.223'), { allow: true })
  t.match(decide(policy, { host: 'example.org', port: 443 }, '93.184.215.14'), { allow: false, reason: 'not-allowlisted' })
  const domainOff = { ...combine(server, userDefault(USERS, 'carol@example.com'), null), hostAddresses: addressSet([]) }
  t.match(decide(domainOff, { host: 'pypi.org', port: 443 }, '151.101.0.223'), { allow: false, reason: 'off' })
  const bob = { ...combine(server, userDefault(USERS, 'bob@other.org'), null), hostAddresses: addressSet([]) }
  t.match(decide(bob, { host: 'db.corp', port: 5432 }, '10.1.2.3'), { allow: true, reason: 'rule' }, 'a user address rule opens a private range')
  t.match(decide(bob, { host: 'db.corp', port: 5433 }, '10.1.2.3'), { allow: false, reason: 'address-class' })
})

t.test('a bad EGRESS_USERS file is refused with every problem named', async t => {
  t.throws(() => parseUserDefaults([]), /expected a JSON object/)
  t.throws(() => parseUserDefaults({ 'not-an-email': { mode: 'off' } }), /"not-an-email": not an email address or @domain/)
  t.throws(() => parseUserDefaults({ 'a@b.c': { mode: 'closed' } }), /"a@b\.c": "mode" must be open, allowlist, off or null/)
  t.throws(() => parseUserDefaults({ 'a@b.c': { allow: ['*bad'] } }), /"a@b\.c": invalid egress rule '\*bad'/)
  t.throws(() => parseUserDefaults({ 'a@b.c': { allow: 'pypi.org' } }), /"allow" must be a list/)
  t.throws(() => parseUserDefaults({ 'a@b.c': { mode: 'off', extra: 1 } }), /unknown field "extra"/)
  t.throws(() => parseUserDefaults({ '@': {} }), /not an email address or @domain/)
  t.throws(() => parseUserDefaults({ 'a@b.c': 'off' }), /expected an object/)
  const many = Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`bad${i}`, {}]))
  t.throws(() => parseUserDefaults(many), /and 2 more/)
})
