/*
 * Byte counts for people and models, in binary multiples. One scaling rule, two spellings: words for
 * descriptions and messages (`12.3 KiB`), and the compact `ls -h` form for directory listings (`1.2M`).
 */
const UNITS = ['K', 'M', 'G', 'T', 'P']

/** bytes ≥ 1024 as a value below 1024 (or in the largest unit) and its unit letter. */
function scaled (bytes: number): { value: number, unit: string } {
  let value = bytes
  let unit = ''
  for (const u of UNITS) {
    value /= 1024
    unit = u
    if (value < 1024) break
  }
  return { value, unit }
}

/** Size in words: `1 byte`, `512 bytes`, `12.3 KiB`, `4.0 MiB`. */
export function humanSize (bytes: number): string {
  if (bytes < 1024) return `${bytes} byte${bytes === 1 ? '' : 's'}`
  const { value, unit } = scaled(bytes)
  return `${value.toFixed(1)} ${unit}iB`
}

/** Size the way `ls -h` prints it: `1023`, `1.5K`, `20K`, `5.0M` (one decimal below 10). */
export function compactSize (bytes: number): string {
  if (bytes < 1024) return String(bytes)
  const { value, unit } = scaled(bytes)
  return `${value < 10 ? value.toFixed(1) : Math.round(value).toString()}${unit}`
}
