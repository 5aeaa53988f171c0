/** The `code` of a Node.js system error (ENOENT, ELOOP, …), undefined for anything else. */
export function errnoCode (err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : undefined
}
