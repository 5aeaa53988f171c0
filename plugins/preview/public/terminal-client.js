// ttyd's WebSocket protocol (docs/contract.md#terminal) between an xterm.js terminal and /terminal/{chat}/ws:
// binary frames led by one command byte. Output is written to xterm with ttyd-style flow control
// (pause when xterm falls behind, resume once it caught up), so a flood in the sandbox never piles
// up in the tab either.
const INPUT = 0x30
const RESIZE = '1'
const PAUSE = '2'
const RESUME = '3'
const OUTPUT = 0x30
const TITLE = 0x31
const PREFERENCES = 0x32
const HIGH_WATER = 512 * 1024
const LOW_WATER = 64 * 1024

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Opens one connection. `handlers`: onOpen(), onTitle(text), onClose({ code, reason, opened }).
 * Returns { close(), resize(cols, rows), send(text) }.
 */
export function connectTerminal (url, term, handlers) {
  const socket = new WebSocket(url, ['tty'])
  socket.binaryType = 'arraybuffer'
  let opened = false
  let pending = 0
  let paused = false
  const disposers = []

  const sendText = text => { if (socket.readyState === WebSocket.OPEN) socket.send(encoder.encode(text)) }
  const sendInput = bytes => {
    if (socket.readyState !== WebSocket.OPEN) return
    const frame = new Uint8Array(bytes.length + 1)
    frame[0] = INPUT
    frame.set(bytes, 1)
    socket.send(frame)
  }

  function write (bytes) {
    pending += bytes.length
    term.write(bytes, () => {
      pending -= bytes.length
      if (paused && pending < LOW_WATER) { paused = false; sendText(RESUME) }
    })
    if (!paused && pending > HIGH_WATER) { paused = true; sendText(PAUSE) }
  }

  socket.addEventListener('open', () => {
    opened = true
    sendText(JSON.stringify({ columns: term.cols, rows: term.rows }))
    disposers.push(term.onData(data => sendInput(encoder.encode(data))))
    disposers.push(term.onBinary(data => sendInput(Uint8Array.from(data, c => c.charCodeAt(0) & 0xff))))
    disposers.push(term.onResize(({ cols, rows }) => sendText(RESIZE + JSON.stringify({ columns: cols, rows }))))
    handlers.onOpen?.()
  })
  socket.addEventListener('message', event => {
    const data = new Uint8Array(event.data)
    const payload = data.subarray(1)
    if (data[0] === OUTPUT) write(payload)
    else if (data[0] === TITLE) handlers.onTitle?.(decoder.decode(payload))
    else if (data[0] === PREFERENCES) { /* ttyd client options: none are sent today */ }
  })
  socket.addEventListener('close', event => {
    for (const d of disposers.splice(0)) d.dispose()
    handlers.onClose?.({ code: event.code, reason: event.reason, opened })
  })

  return {
    close: () => socket.close(1000, 'viewer closed'),
    send: text => sendInput(encoder.encode(text))
  }
}
