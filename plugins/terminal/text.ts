/** Untrusted text from a sandbox made displayable: control characters removed, whitespace collapsed, cut to `max` UTF-16 units. */
export function clip (raw: string, max: number): string {
  // eslint-disable-next-line no-control-regex
  const text = raw.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').replace(/\s+/g, ' ').trim()
  if (text.length <= max) return text
  let cut = text.slice(0, max - 1)
  // never end on the first half of a surrogate pair
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1)
  return `${cut}…`
}
