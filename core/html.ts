const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

/** Text safe in HTML content and in quoted attribute values: `& < > " '` become entities. */
export function escapeHtml (s: string): string {
  return s.replace(/[&<>"']/g, c => ENTITIES[c] as string)
}
