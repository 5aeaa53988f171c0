import t from 'tap'
import { encodeRelPath, parseUploadUri, uploadUri } from '../../../plugins/tier-resources/uri.js'
import { isTextMime } from '../../../plugins/tier-resources/mime.js'

t.test('URIs percent-encode every byte outside A-Z a-z 0-9 - _ . ~ in uppercase hex', async t => {
  t.equal(uploadUri('demoa', 'sub/nested.json'), 'file://uploads/demoa/sub%2Fnested.json')
  t.equal(encodeRelPath("a b!'()*é~_-.x"), 'a%20b%21%27%28%29%2A%C3%A9~_-.x')
  t.equal(encodeRelPath('日本.txt'), '%E6%97%A5%E6%9C%AC.txt')
})

t.test('parsing reverses encoding and rejects foreign or malformed URIs', async t => {
  for (const rel of ['sub/nested.json', 'a b/%41 literal.txt', '日本/x y.md', '.hidden']) {
    t.same(parseUploadUri(uploadUri('chat-a', rel)), { chat: 'chat-a', relPath: rel })
  }
  t.equal(parseUploadUri('file:///etc/passwd'), undefined)
  t.equal(parseUploadUri('file://uploads/chat-a'), undefined)
  t.equal(parseUploadUri('file://uploads/chat-a/'), undefined)
  t.equal(parseUploadUri('file://uploads//x'), undefined)
  t.equal(parseUploadUri('file://uploads/chat-a/a/b'), undefined, 'an unencoded slash is not our URI')
  t.equal(parseUploadUri('file://uploads/chat-a/%E0%A4%A'), undefined, 'bad percent-encoding')
})

t.test('text-like MIME types are returned as text', async t => {
  for (const m of ['text/csv', 'application/json', 'application/xml', 'application/yaml', 'application/x-yaml', 'application/javascript', 'application/x-sh']) t.ok(isTextMime(m), m)
  for (const m of ['application/pdf', 'image/png', 'application/octet-stream', 'application/zip']) t.notOk(isTextMime(m), m)
})
