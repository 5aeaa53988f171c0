// A worker cannot be given a memory limit, and a parser that exhausts its heap takes the whole tab down
// (measured in Chromium: the renderer crashes). The page auto-selects the newest file on load, so such a file
// would crash the page again on every reload. Before parsing, the page marks the document in localStorage
// (survives the crash, shared by the chat's tabs) and clears the mark when parsing ends; a document still
// marked on the next load is not parsed on its own ("Preview paused", with a button to parse it anyway).
// A tab closed mid-parse leaves the same mark, on purpose: a crash runs no unload handler to tell them apart.
// Keys hold chat id, path, size and mtime, never a token.
// In an opaque-origin embed storage is unavailable and the guard does nothing.
const PREFIX = 'cubicle-preview-parsing:'

function storage () {
  try { return window.localStorage } catch { return null }
}

export function begin (key) {
  try { storage()?.setItem(PREFIX + key, String(Date.now())) } catch {}
}

export function end (key) {
  try { storage()?.removeItem(PREFIX + key) } catch {}
}

/** True when an earlier parse of this exact document never finished (the page crashed or was closed). */
export function unfinished (key) {
  try { return (storage()?.getItem(PREFIX + key) ?? null) !== null } catch { return false }
}
