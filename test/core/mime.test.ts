import t from 'tap'
import { extensionOf, mimeOf } from '../../core/mime.js'

t.test('the extension is lowercased, without the dot, from the last path segment', async t => {
  t.equal(extensionOf('/a/B.PNG'), 'png')
  t.equal(extensionOf('/a/x.tar.gz'), 'gz')
  t.equal(extensionOf('/a/.bashrc'), '', 'a dot-file has no extension')
  t.equal(extensionOf('/a/Makefile'), '')
  t.equal(extensionOf('src/Dockerfile'), 'dockerfile')
  t.equal(extensionOf('dir.v2/README'), '', 'a dot in a directory name is not an extension')
})

// one MIME table for serving files and for upload resources (they disagreed on .ts)
t.test('one MIME table: source code is text/plain, unknown is octet-stream', async t => {
  t.equal(mimeOf('a/b/report.PDF'), 'application/pdf')
  t.equal(mimeOf('notes.txt'), 'text/plain')
  t.equal(mimeOf('code/main.ts'), 'text/plain', '.ts is TypeScript source, not MPEG-TS')
  t.equal(mimeOf('code/App.tsx'), 'text/plain')
  t.equal(mimeOf('script.py'), 'text/x-python')
  t.equal(mimeOf('a.drawio'), 'application/xml')
  t.equal(mimeOf('archive.tar.gz'), 'application/gzip')
  t.equal(mimeOf('Makefile'), 'application/octet-stream')
  t.equal(mimeOf('.bashrc'), 'application/octet-stream')
  t.equal(mimeOf('x.unknownext'), 'application/octet-stream')
  t.equal(mimeOf('dir.html/blob'), 'application/octet-stream', 'the directory does not lend its extension')
})
