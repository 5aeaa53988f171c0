/*
 * Labels every engine can carry (docs/engine.md#labels): each key and value the core or an engine sets on a
 * sandbox, volume, network or lease object is a valid Kubernetes label, so that a Kubernetes engine takes
 * them as they are and a Docker engine's objects read the same. A value is at most 63 characters of
 * [-A-Za-z0-9_.], alphanumeric at both ends (or empty); a key is a name of that form, optionally behind a
 * DNS-subdomain prefix and '/'.
 */

const VALUE = /^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/
const NAME = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$/
const DNS_LABEL = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$/

/** Whether `v` is a valid Kubernetes label value. */
export function validLabelValue (v: string): boolean {
  return typeof v === 'string' && v.length <= 63 && VALUE.test(v)
}

/** Whether `k` is a valid Kubernetes label key (`[prefix/]name`). */
export function validLabelKey (k: string): boolean {
  if (typeof k !== 'string') return false
  const slash = k.indexOf('/')
  const name = slash === -1 ? k : k.slice(slash + 1)
  if (name.length === 0 || name.length > 63 || !NAME.test(name)) return false
  if (slash === -1) return true
  const prefix = k.slice(0, slash)
  return prefix.length > 0 && prefix.length <= 253 && prefix.split('.').every(part => part.length <= 63 && DNS_LABEL.test(part))
}

/** A valid label value made from `s`: other characters become `_`, at most 63, alphanumeric ends. */
export function labelValue (s: string): string {
  if (validLabelValue(s)) return s
  return s.replace(/[^-A-Za-z0-9_.]/g, '_').slice(0, 63).replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '')
}

/** RFC 3339, UTC, whole seconds: `2026-01-02T03:04:05Z`. */
export function rfc3339 (d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z')
}

/** A time as a label value: `20260102T030405Z` (RFC 3339's basic format, UTC, seconds; no `:`). */
export function labelTime (d: Date): string {
  return rfc3339(d).replace(/[-:]/g, '')
}

/**
 * A time label read back as RFC 3339: labelTime's basic form converted, anything else (the extended form that
 * earlier versions wrote, or text that is no time) answered as it is.
 */
export function timeOfLabel (v: string): string {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(v)
  return m === null ? v : `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}Z`
}
