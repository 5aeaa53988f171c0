/*
 * Docker's attach framing of a non-TTY exec (stdout and stderr multiplexed on one connection),
 * decoded for DockerProcess (docker-process.ts). Pure: unit-testable without an engine.
 */

/** Stream ids of Docker's multiplexed attach protocol. */
export const STDOUT = 1
export const STDERR = 2

/**
 * Incremental demultiplexer of Docker's attach framing (8-byte header: stream id, 3 zero bytes,
 * big-endian length). Payloads are handed on as slices of the incoming chunks: nothing accumulates
 * beyond a partial 8-byte header, so a gigabyte of output streams through in constant memory.
 */
export class Demuxer {
  private readonly header = Buffer.alloc(8)
  private headerLen = 0
  private remaining = 0
  private stream = STDOUT

  constructor (private readonly onFrame: (stream: number, data: Buffer) => void) {}

  push (chunk: Buffer): void {
    let off = 0
    while (off < chunk.length) {
      if (this.remaining === 0) {
        const take = Math.min(8 - this.headerLen, chunk.length - off)
        chunk.copy(this.header, this.headerLen, off, off + take)
        this.headerLen += take
        off += take
        if (this.headerLen < 8) return
        this.headerLen = 0
        this.stream = this.header[0] ?? STDOUT
        this.remaining = this.header.readUInt32BE(4)
        continue
      }
      const take = Math.min(this.remaining, chunk.length - off)
      const data = chunk.subarray(off, off + take)
      off += take
      this.remaining -= take
      if (this.stream === STDOUT || this.stream === STDERR) this.onFrame(this.stream, data)
    }
  }
}
