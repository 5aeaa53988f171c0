const TEXT_TYPES = new Set(['application/json', 'application/xml', 'application/yaml', 'application/x-yaml', 'application/javascript', 'application/x-sh'])

/** Whether resources/read returns `text` (else a base64 `blob`), docs/contract.md#tier-5-uploads-as-mcp-resources; the MIME itself is core/mime.ts. */
export function isTextMime (mime: string): boolean {
  return mime.startsWith('text/') || TEXT_TYPES.has(mime)
}
