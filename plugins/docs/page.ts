import { escapeHtml as esc } from '../../core/html.js'
import { SERVER_NAME, SERVER_VERSION } from '../../core/version.js'

export function renderDocsPage (input: { publicBaseUrl: string, tools: Array<{ name: string, description?: string }> }): string {
  const base = esc(input.publicBaseUrl)
  const tools = input.tools.map(t => `<li><code>${esc(t.name)}</code> — ${esc((t.description ?? '').split('\n')[0] ?? '')}</li>`).join('\n')
  const desktop = esc(JSON.stringify({
    mcpServers: {
      'computer-use': {
        command: 'npx',
        args: ['-y', 'mcp-remote', `${input.publicBaseUrl}/mcp`, '--header', 'Authorization:Bearer ${CU_KEY}', '--header', 'X-Chat-Id:${CU_CHAT}'],
        env: { CU_KEY: '<MCP_API_KEY>', CU_CHAT: 'desktop-1' }
      }
    }
  }, null, 2))
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cubicle — ${SERVER_NAME} ${SERVER_VERSION}</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1d232b}
code,pre{font:14px ui-monospace,monospace;background:#f2f4f7;border-radius:4px}
code{padding:.1em .3em} pre{padding:.8rem;overflow:auto} h1{margin-bottom:0} .sub{color:#5b6573;margin-top:.2rem}
table{border-collapse:collapse} td,th{border-bottom:1px solid #e3e7ec;padding:.3rem .6rem;text-align:left;vertical-align:top}
</style></head><body>
<h1>Cubicle</h1>
<p class="sub">${SERVER_NAME} ${SERVER_VERSION} — a computer for every chat</p>
<p>This server speaks the Model Context Protocol (Streamable HTTP, stateless) at <code>${base}/mcp</code>.
Each chat, named by the <code>X-Chat-Id</code> header, gets its own isolated Linux sandbox with a persistent
home directory, a shell, file tools and published outputs.</p>
<h2>Tools</h2><ul>${tools}</ul>
<h2>Headers</h2>
<table><tr><th>Header</th><th>Purpose</th></tr>
<tr><td><code>Authorization: Bearer &lt;key&gt;</code></td><td>Required when the operator set <code>MCP_API_KEY</code>.</td></tr>
<tr><td><code>X-Chat-Id</code> (or <code>X-OpenWebUI-Chat-Id</code>)</td><td>Selects the chat's sandbox: 1–64 of <code>a-z 0-9 _ - :</code>, starting with a letter or digit; case-insensitive.</td></tr>
<tr><td><code>X-User-Email</code>, <code>X-User-Name</code></td><td>Optional: git author and per-user settings.</td></tr>
</table>
<p>No session id is needed: every request stands alone, and a stale <code>Mcp-Session-Id</code> is ignored.</p>
<h2>Connect</h2>
<h3>Any MCP client</h3>
<pre>POST ${base}/mcp
Content-Type: application/json
Accept: application/json, text/event-stream
Authorization: Bearer &lt;MCP_API_KEY&gt;
X-Chat-Id: &lt;chat id&gt;</pre>
<h3>MCP Inspector</h3>
<pre>npx @modelcontextprotocol/inspector --cli ${base}/mcp --transport http --method tools/list \\
  --header "Authorization: Bearer &lt;MCP_API_KEY&gt;" --header "X-Chat-Id: demo"</pre>
<h3>Claude Desktop (through mcp-remote)</h3>
<pre>${desktop}</pre>
<h3>Claude Code</h3>
<pre>claude mcp add --transport http computer-use ${base}/mcp --header "Authorization: Bearer &lt;MCP_API_KEY&gt;" --header "X-Chat-Id: my-chat"</pre>
<h3>n8n (MCP Client Tool)</h3>
<p>Transport "HTTP Streamable", endpoint <code>${base}/mcp</code>, credential "Multiple Headers" with
<code>Authorization: Bearer &lt;MCP_API_KEY&gt;</code> and <code>X-Chat-Id: n8n-&lt;workflow id&gt;</code>.</p>
<h2>Other endpoints</h2>
<ul><li><code>GET /health</code> — liveness</li><li><code>GET /ready</code> — Docker, sandbox image and data directory</li>
<li><code>GET /mcp-info</code> — server, tools and headers (bearer key required in protected mode)</li>
<li><code>GET /system-prompt?chat_id=…</code> — the chat's system prompt for clients that inject it themselves</li>
<li><code>GET /metrics</code> — Prometheus metrics (bearer key required in protected mode)</li>
<li><a href="/openapi.json"><code>GET /openapi.json</code></a> — every HTTP route as OpenAPI 3.1, generated from the route schemas</li></ul>
</body></html>
`
}
