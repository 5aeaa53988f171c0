# TCP connections of cubicle-agent (CONNECT requests), imported by cubicle-agent.py after its hardening:
# a connection to an app listening on the sandbox's loopback (127.0.0.1, then ::1), spliced over the
# agent's framed stream, so that the server's app proxy needs no exec per connection.
#
# CONNECT (JSON: port, window) opens it: CONNECTED (JSON: family) or FAIL (JSON: errno, error) answers.
# Then STDIN frames carry the server's bytes to the app, and OUT frames the app's bytes to the server;
# CLOSE (server) or the app's end closes it, and EXIT (JSON: code null) is its last frame.
# Flow control both ways, per connection: the agent sends at most `window` bytes the server has not
# acknowledged (ACK: u32 bytes it consumed), and acknowledges what it wrote to the app (CREDIT: u32),
# so the server never sends more than `window` unwritten bytes either; more than that closes the
# connection. Credits go out a quarter of the window at a time: a small request costs no frame back
# (the server waits only when a whole window is unwritten, and by then three quarters of it are in the
# app's socket, whose writing crosses the quarter). Nothing waits on another connection: a slow reader
# stalls only its own.
#
# The relay is an asyncio protocol, not stream reader/writer tasks: the app's bytes become an OUT frame
# in the callback that received them, and the server's bytes go to the app's socket in the dispatch of
# their frame, so a small request and its answer cost no task switch in the agent (docs/performance.md,
# (k)). Frames are written whole with one write on the agent's stream (as Agent.send does, so frames
# never interleave); while that stream's buffer is above STREAM_HIGH, connections stop reading their
# apps until it drained, taking their turn on the agent's send lock like every other request.
import asyncio
import socket
import struct

T_STDIN, T_CLOSE, T_ACK = 17, 19, 22
T_OUT, T_EXIT, T_FAIL, T_CONNECTED, T_CREDIT = 2, 4, 5, 8, 9
CHUNK = 256 * 1024
MIN_WINDOW, MAX_WINDOW = 64 * 1024, 4 * 1024 * 1024
# Connections open at once (all apps of the sandbox together); the server caps per chat far below.
MAX_CONNECTIONS = 256
CONNECT_TIMEOUT = 10.0
# Bytes waiting in the agent stream's buffer beyond which connections stop reading their apps.
STREAM_HIGH = 64 * 1024
U32 = struct.Struct('>I')
HEADER = struct.Struct('>IIB')


class _Closed:
    def __init__(self, conn):
        self.conn = conn

    def set(self):
        self.conn.end()


class Connection(asyncio.Protocol):
    def __init__(self, agent, rid):
        self.agent = agent
        self.rid = rid
        self.transport = None
        # bytes the server may still receive before it acknowledges more
        self.room = 0
        self.window = MIN_WINDOW
        # the server's bytes handed to the app's transport and not yet in its socket
        self.queued = 0
        # written to the app, not credited yet (less than a quarter of the window)
        self.uncredited = 0
        # the app's bytes read beyond the window (at most one read), sent as ACKs come
        self.pending = b''
        # reading the app is held: the window is used up, or the agent's stream is full
        self.paused = False
        self.stream_wait = False
        # the CONNECTED frame is out: until then the app's bytes wait in `pending`
        self.started = False
        # the app's side is gone (its end, an error, or our close)
        self.app_gone = False
        self.done = asyncio.get_running_loop().create_future()
        # Agent.lose() ends every request with `closed.set()`
        self.closed = _Closed(self)

    # The server's frames (Agent.dispatch), synchronous.
    def control(self, typ, payload):
        if typ == T_STDIN:
            if self.transport is None or self.app_gone:
                return
            self.queued += len(payload)
            if self.queued > self.window:
                # The server sent beyond the window: it is broken; end this connection.
                self.end()
                return
            self.transport.write(payload)
            self.account()
        elif typ == T_ACK:
            if len(payload) == 4:
                self.room = min(self.room + U32.unpack(payload)[0], self.window)
                self.send_out()
        elif typ == T_CLOSE:
            self.end()

    def frame(self, typ, payload):
        # One whole frame on the agent's stream; false once the stream is lost.
        if self.agent.lost:
            self.end()
            return False
        self.agent.writer.write(HEADER.pack(len(payload) + 5, self.rid, typ) + payload)
        return True

    def account(self):
        # What left the app transport's buffer was written to the app: credited a quarter window at a time.
        written = self.queued - self.transport.get_write_buffer_size()
        if written <= 0:
            return
        self.queued -= written
        self.uncredited += written
        if self.uncredited >= self.window // 4:
            n, self.uncredited = self.uncredited, 0
            self.frame(T_CREDIT, U32.pack(n))

    def send_out(self):
        # The app's bytes read so far, within the window (none before CONNECTED); the rest waits, reading held.
        data = self.pending
        n = min(len(data), self.room) if self.started else 0
        for at in range(0, n, CHUNK):
            if not self.frame(T_OUT, data[at:min(n, at + CHUNK)]):
                return
        self.room -= n
        self.pending = data[n:] if n < len(data) else b''
        if n > 0 and not self.stream_wait and self.agent.writer.transport.get_write_buffer_size() > STREAM_HIGH:
            self.stream_wait = True
            asyncio.ensure_future(self.stream_drained())
        if self.app_gone:
            if not self.pending:
                self.finish()
        else:
            self.hold()

    def hold(self):
        # Reading the app goes on only while the window has room, nothing is pending and the stream is not full.
        if self.transport is None or self.app_gone:
            return
        stop = self.room <= 0 or bool(self.pending) or self.stream_wait
        if stop and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        elif not stop and self.paused:
            self.paused = False
            self.transport.resume_reading()

    async def stream_drained(self):
        try:
            async with self.agent.lock:
                await self.agent.writer.drain()
        except (ConnectionError, OSError):
            self.agent.lose()
        self.stream_wait = False
        self.hold()

    def end(self):
        # Ours (CLOSE, a broken window, the stream lost): what the app sent and we hold is dropped.
        self.pending = b''
        if self.transport is not None:
            self.transport.close()
        self.finish()

    def finish(self):
        if not self.done.done():
            self.done.set_result(None)

    # asyncio.Protocol: the app's side. Reading is never paused here: before Python 3.11.3 a transport
    # paused in connection_made still started reading; bytes before CONNECTED wait in `pending` instead.
    def connection_made(self, transport):
        self.transport = transport
        # The app's buffer is reported (pause_writing/resume_writing) as soon as it is not empty: credits follow it.
        transport.set_write_buffer_limits(high=0, low=0)

    def data_received(self, data):
        self.pending = self.pending + data if self.pending else data
        self.send_out()

    def eof_received(self):
        return False  # the app ended its side: the transport closes, connection_lost follows

    def connection_lost(self, exc):
        self.app_gone = True
        # What is pending still goes out as the server acknowledges it, then EXIT.
        if not self.pending:
            self.finish()

    def pause_writing(self):
        pass

    def resume_writing(self):
        if self.transport is not None and not self.app_gone:
            self.account()

    async def run(self, spec):
        try:
            port = spec['port']
            window = spec.get('window', MIN_WINDOW)
            if not isinstance(port, int) or not 1 <= port <= 65535 or not isinstance(window, int):
                raise ValueError('bad port or window')
        except (KeyError, TypeError, ValueError) as e:
            await self.agent.send_json(self.rid, T_FAIL, {'errno': 0, 'error': str(e)[:300]})
            return
        self.window = self.room = max(MIN_WINDOW, min(window, MAX_WINDOW))
        loop = asyncio.get_running_loop()
        family, err = 0, None
        # 127.0.0.1 first, then ::1 (an app listening only on IPv6 loopback); the first refusal's errno is kept.
        for host, fam in (('127.0.0.1', socket.AF_INET), ('::1', socket.AF_INET6)):
            sock = None
            try:
                sock = socket.socket(fam, socket.SOCK_STREAM)
                sock.setblocking(False)
                await asyncio.wait_for(loop.sock_connect(sock, (host, port)), CONNECT_TIMEOUT)
            except asyncio.TimeoutError:
                err = err or TimeoutError(110, 'Connection timed out')
            except OSError as e:
                err = err or e
            else:
                family = 4 if fam == socket.AF_INET else 6
                break
            if sock is not None:
                sock.close()
        if family == 0:
            await self.agent.send_json(self.rid, T_FAIL, {'errno': getattr(err, 'errno', 0) or 0, 'error': (getattr(err, 'strerror', None) or str(err))[:300]})
            return
        # TCP_NODELAY is set by asyncio's transport.
        await loop.create_connection(lambda: self, sock=sock)
        try:
            await self.agent.send_json(self.rid, T_CONNECTED, {'family': family})
            self.started = True
            if self.agent.lost:
                self.end()
            self.send_out()
            await self.done
        finally:
            self.transport.close()
            await self.agent.send_json(self.rid, T_EXIT, {'code': None})


async def open_connection(agent, rid, spec):
    # One CONNECT request: its Connection is registered for the server's frames while it lives.
    if rid in agent.conns or rid in agent.reqs or rid == 0:
        return
    conn = Connection(agent, rid)
    if len(agent.conns) >= MAX_CONNECTIONS:
        await agent.send_json(rid, T_FAIL, {'errno': 24, 'error': f'more than {MAX_CONNECTIONS} connections at once'})
        return
    agent.conns[rid] = conn
    try:
        await conn.run(spec)
    finally:
        agent.conns.pop(rid, None)
