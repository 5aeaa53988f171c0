/*
 * Entry names for the archive. A Linux file name may hold bytes a zip name must not: yazl turns `\` into
 * `/` (so `a\..\..\x` becomes a traversal it then refuses with a throw, and `d\x` would silently land in
 * a directory `d`), and refuses a name starting like a drive (`C:`). Windows extractors also split on `\`.
 * Such names are renamed (`\` → `_`, a leading drive colon → `_`), and a rename that collides with
 * another entry gets ` (2)`, ` (3)`, … before its extension, so no file is lost and none overwrites another.
 */

const DRIVE = /^([A-Za-z]):/

/** The name as the zip will carry it (no `\`, no drive prefix); unchanged for ordinary names. */
export function zipSafeName (relPath: string): string {
  return relPath.replace(/\\/g, '_').replace(DRIVE, '$1_')
}

/** Gives each walked path a distinct, zip-safe entry name; remembers what it handed out. */
export class ZipNames {
  private readonly used = new Set<string>()
  // Next suffix to try per renamed name: many names renamed alike stay linear, not quadratic.
  private readonly nextSuffix = new Map<string, number>()
  /** How many names had to change. */
  renamed = 0

  /** Call in walk order with every path first through `reserve`, then `name` (so renames never take a real name). */
  reserve (relPath: string): void {
    if (zipSafeName(relPath) === relPath) this.used.add(relPath)
  }

  name (relPath: string): string {
    const safe = zipSafeName(relPath)
    if (safe === relPath) return relPath
    this.renamed++
    let candidate = safe
    let n = this.nextSuffix.get(safe) ?? 2
    while (this.used.has(candidate)) candidate = withSuffix(safe, ` (${n++})`)
    this.nextSuffix.set(safe, n)
    this.used.add(candidate)
    return candidate
  }
}

function withSuffix (path: string, suffix: string): string {
  const slash = path.lastIndexOf('/')
  const dot = path.lastIndexOf('.')
  return dot > slash + 1 ? `${path.slice(0, dot)}${suffix}${path.slice(dot)}` : `${path}${suffix}`
}
