import t from 'tap'
import { chatKey, normalizeChatId } from '../../core/chat-id.js'
import { callerOf, cleanUserName, readUser, resolveMcpChat, userChatId, validEmail, type Principal } from '../../core/identity.js'
import { chatPaths } from '../../core/chat-paths.js'

t.test('chat ids: the accepted, normalised and rejected tables of docs/contract.md#chat-id-validation', async t => {
  for (const ok of ['default', 'abc123', 'my-session-123', 'local:9fz_x-1', 'n8n_42', 'a'.repeat(64)]) t.equal(normalizeChatId(ok), ok, ok)
  t.equal(normalizeChatId('A1B2C3D4-E5F6-7890-ABCD-EF1234567890'), 'a1b2c3d4-e5f6-7890-abcd-ef1234567890')
  t.equal(normalizeChatId('  my-chat  '), 'my-chat')
  t.equal(normalizeChatId('\tmy-chat\n'), 'my-chat')
  for (const bad of ['', '   ', '..x', 'a/b', 'a\\b', 'a b', 'a.b', '-abc', '_x', 'chat\u0000id', 'é', 'ｆｕｌｌ', '\u00a0x', 'a'.repeat(65), '%2e%2e', 'x\ny']) {
    t.equal(normalizeChatId(bad), null, JSON.stringify(bad))
  }
})

t.test('chat key is the first 32 hex chars of sha256 and distinct ids never collide into one name', async t => {
  t.equal(chatKey('default'), '37a8eec1ce19687d132fe29051dca629')
  t.not(chatKey('a-b'), chatKey('a_b'))
  const paths = chatPaths('/data', 'Some-Chat'.toLowerCase())
  t.equal(paths.dir, `/data/chats/${chatKey('some-chat')}`)
  t.notMatch(paths.uploads, /some-chat/)
})

t.test('user headers: email validation, name decoding, aliases and credentials', async t => {
  t.equal(validEmail('a@b.c'), 'a@b.c')
  for (const bad of ['a@@b', 'a b@c', '<a@b>', 'ab', '@b', 'a@', `${'x'.repeat(250)}@b.cd`, "o'neil@x.y"]) t.equal(validEmail(bad), undefined, bad)
  t.equal(cleanUserName('J%C3%BCrgen%20M'), 'Jürgen M')
  t.equal(cleanUserName('100%'), '100%', 'invalid percent-encoding kept as is')
  t.equal(cleanUserName('a\u0007b'), 'ab')
  t.equal(cleanUserName('x'.repeat(300))?.length, 128)
  const user = readUser({
    'x-openwebui-user-email': ' ann@example.com ',
    'x-gitlab-host': 'GitLab.Example.com:8443',
    'x-anthropic-base-url': 'https://evil.example',
    'x-mcp-tokens-url': 'https://evil.example',
    'x-mcp-servers': 'github, Jira,bad name,github,-x'
  })
  t.equal(user.email, 'ann@example.com')
  t.equal(user.credentials.gitlabHost, 'gitlab.example.com:8443')
  t.equal(user.credentials.anthropicBaseUrl, undefined, 'a client URL is ignored without a client key')
  t.equal(user.credentials.mcpTokensUrl, undefined)
  t.same(user.mcpServers, ['github', 'jira'])
  const withKey = readUser({ 'x-anthropic-api-key': 'sk', 'x-anthropic-base-url': 'https://gw.example/v1', 'x-user-email': 'bad email' })
  t.equal(withKey.credentials.anthropicBaseUrl, 'https://gw.example/v1')
  t.equal(withKey.emailRejected, true)
  t.equal(readUser({ 'x-gitlab-host': 'bad host/x' }).credentials.gitlabHost, undefined)
})

t.test('SINGLE_USER_MODE resolution: absence decides, not the value', async t => {
  t.same(resolveMcpChat({}, 'lenient'), { kind: 'chat', chatId: 'default', lenientNote: true })
  t.same(resolveMcpChat({ 'x-chat-id': 'default' }, 'lenient'), { kind: 'chat', chatId: 'default', lenientNote: false })
  t.same(resolveMcpChat({}, 'false'), { kind: 'missing' })
  t.same(resolveMcpChat({ 'x-chat-id': 'default' }, 'false'), { kind: 'chat', chatId: 'default', lenientNote: false })
  t.same(resolveMcpChat({ 'x-chat-id': 'a/b' }, 'true'), { kind: 'chat', chatId: 'default', lenientNote: false })
  t.equal(resolveMcpChat({ 'x-chat-id': 'a/b' }, 'lenient').kind, 'invalid')
})

// an OAuth token's subject is the user, and its chats stay below the user's own.
t.test('OAuth principals: the token decides the user and keeps the chat among their own', async t => {
  const home = userChatId('alice@example.com')
  t.match(home, /^user:[0-9a-f]{20}$/)
  t.equal(userChatId('alice@example.com'), home, 'stable')
  t.not(userChatId('bob@example.com'), home)
  const alice: Principal = { kind: 'user', subject: 'alice@example.com', email: 'alice@example.com', name: 'Alice A' }
  t.same(resolveMcpChat({}, 'lenient', alice), { kind: 'chat', chatId: home, lenientNote: false }, 'no header: the user\'s own computer, no lenient note')
  t.same(resolveMcpChat({}, 'false', alice), { kind: 'chat', chatId: home, lenientNote: false }, 'strict mode needs no header either')
  t.same(resolveMcpChat({ 'x-chat-id': 'Proj-1' }, 'lenient', alice), { kind: 'chat', chatId: `${home}:proj-1`, lenientNote: false }, 'a header names a chat below the user\'s')
  t.same(resolveMcpChat({ 'x-chat-id': userChatId('bob@example.com') }, 'lenient', alice), { kind: 'chat', chatId: `${home}:${userChatId('bob@example.com')}`, lenientNote: false }, 'never another user\'s chat')
  t.same(resolveMcpChat({ 'x-chat-id': 'a'.repeat(38) }, 'lenient', alice), { kind: 'chat', chatId: `${home}:${'a'.repeat(38)}`, lenientNote: false }, '64 characters in all')
  t.match(resolveMcpChat({ 'x-chat-id': 'a'.repeat(39) }, 'lenient', alice), { kind: 'invalid', reason: /0,37/ }, 'too long once below the user\'s')
  t.match(resolveMcpChat({ 'x-chat-id': '../x' }, 'lenient', alice), { kind: 'invalid' })
  t.same(resolveMcpChat({}, 'true', alice), { kind: 'chat', chatId: 'default', lenientNote: false }, 'SINGLE_USER_MODE=true: one computer for all')
  t.same(resolveMcpChat({}, 'false', { kind: 'key' }), { kind: 'missing' }, 'the API key names no user: strict mode still needs the header')
  const user = readUser({ 'x-user-email': 'mallory@example.com', 'x-user-name': 'Mallory' }, alice)
  t.equal(user.email, 'alice@example.com', 'the token\'s email wins over X-User-Email')
  t.equal(user.name, 'Alice A')
  t.equal(readUser({ 'x-user-email': 'mallory@example.com' }).email, 'mallory@example.com', 'without a principal the header counts as before')
})

t.test('the settings-service pair says how its caller was authenticated: not at all, the key, or OAuth', async t => {
  const pair = { 'x-mcp-tokens-url': 'https://settings.example', 'x-mcp-tokens-api-key': 'k' }
  t.equal(callerOf(null), undefined)
  t.same(readUser(pair).credentials, { mcpTokensApiKey: 'k', mcpTokensUrl: 'https://settings.example' }, 'no caller: user-skills ignores the pair')
  t.same(readUser(pair, null).credentials, { mcpTokensApiKey: 'k', mcpTokensUrl: 'https://settings.example' }, 'no principal, as above')
  t.equal(readUser(pair, { kind: 'link', scope: 'c', token: 'tok' }).credentials.mcpTokensCaller, undefined, 'a capability token is no caller')
  t.equal(readUser(pair, { kind: 'key' }).credentials.mcpTokensCaller, 'key')
  t.equal(readUser(pair, { kind: 'user', subject: 'ann@example.com', email: 'ann@example.com' }).credentials.mcpTokensCaller, 'oauth')
  t.equal(readUser({ 'x-mcp-tokens-url': 'https://settings.example' }).credentials.mcpTokensCaller, undefined, 'no pair, no caller')
})
