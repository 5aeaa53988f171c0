#!/usr/bin/env bash
# Removes dead weight from a node_modules that build.sh installed for the image (slim <= 1.5 GB).
#   trim-node-modules.sh DIR/node_modules
# Part of the build hash (and of build.sh's install stamp), so a change here rebuilds node_modules and the image.
# Only what nothing loads at run time: source maps and TypeScript declarations (about 6 MB over the browser
# CLI and pptxgenjs; READMEs stay: @playwright/cli reads its skill .md files), Codex's voice host (51 MB:
# GStreamer and a realtime-audio helper for its interactive TUI; `codex exec` in a sandbox has no microphone)
# and opencode's second binary when it is byte-identical to the first (177 MB; the launcher keeps choosing).
set -euo pipefail
nm=${1:?usage: trim-node-modules.sh DIR/node_modules}
[ -d "$nm" ] || { echo "trim-node-modules.sh: $nm is not a directory" >&2; exit 2; }

find "$nm" -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete

for voice in "$nm"/@openai/codex-linux-*/vendor/*/codex-resources/voice; do
  [ -d "$voice" ] && rm -rf "$voice"
done

avx2=$nm/opencode-linux-x64/bin/opencode
base=$nm/opencode-linux-x64-baseline/bin/opencode
if [ -f "$avx2" ] && [ ! -L "$base" ] && [ -f "$base" ] && cmp -s "$avx2" "$base"; then
  ln -sf ../../opencode-linux-x64/bin/opencode "$base"
fi
