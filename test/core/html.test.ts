import t from 'tap'
import { escapeHtml } from '../../core/html.js'

// one HTML escaper for the preview, terminal, docs and OAuth pages
t.test('the five HTML-significant characters become entities, the rest stays', async t => {
  t.equal(escapeHtml('<a href="x" title=\'y\'>&</a>'), '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;')
  t.equal(escapeHtml('chat-é 日本 ~_.'), 'chat-é 日本 ~_.')
  t.equal(escapeHtml('&amp;'), '&amp;amp;', 'escaping is not idempotent: applied once, to raw text')
})
