// The full-window terminal at /terminal/{chat}: the preview's Terminal view without the rest.
import { mountTerminal } from './terminal-view.js'

const config = JSON.parse(document.getElementById('config').textContent)
// The token stays in memory only (as on the preview page).
const here = new URL(window.location.href)
if (here.searchParams.has('t')) {
  here.searchParams.delete('t')
  try { window.history.replaceState(null, '', here.pathname + here.search + here.hash) } catch {}
}
mountTerminal(document.getElementById('terminal'), config, { standalone: true })
