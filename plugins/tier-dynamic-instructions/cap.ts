/** Cuts at a line boundary below `maxBytes` and says where the rest is. Deterministic, so still byte-stable. */
export function capInstructions (text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text
  const note = '\n[Cut here: read /home/assistant/README.md for the complete guide.]\n'
  const room = maxBytes - Buffer.byteLength(note, 'utf8')
  let cut = Buffer.from(text, 'utf8').subarray(0, room).toString('utf8').replace(/\uFFFD$/, '')
  const nl = cut.lastIndexOf('\n')
  if (nl > 0) cut = cut.slice(0, nl)
  return cut + note
}
