#!/usr/bin/env bash
# The README's picture of an MCP Apps view in a chat host (docs/images/mcp-apps-browser.png): runs the
# host-page test (test/integration/mcp-apps-host.test.ts; Docker, the sandbox image and Debian's Chromium),
# which saves the Browser view, live on the model's page, inside the test host's chat.
set -euo pipefail
cd "$(dirname "$0")/.."
APPS_SCREENSHOT="$PWD/docs/images/mcp-apps-browser.png" npx tap --timeout 600 test/integration/mcp-apps-host.test.ts
echo "wrote docs/images/mcp-apps-browser.png"
