# cubicle_agent: the in-sandbox agent, imported and run by cubicle-agent.py after its hardening (the
# image compiles it at build). Two ways in, one framed protocol: started by the image's entrypoint
# with --connect PATH, it connects to a Unix socket the engine listens on (a directory the engine
# bind-mounts read-only, docs/engine.md#the-agent-socket) and reconnects whenever that stream ends;
# started by the server through a long-lived `docker exec -i` (the fallback), it speaks over
# stdin/stdout and exits when stdin ends. Either way commands and file operations need no further
# exec through the container engine.
#
# Frame: u32 length (big-endian, of what follows) | u32 request id | u8 type | payload.
# Server -> agent: EXEC (JSON: argv, cwd, env, merged, stdin, listening), STDIN (bytes), STDIN_END, CLOSE
#   (stop reading the request's output and end it), FILE (JSON file operation; answered by RESULT),
#   CONNECT (JSON: port, window; a TCP connection to the sandbox's loopback, cubicle_connect.py), ACK
#   (u32: bytes of a connection's output the server consumed).
# Agent -> server: HELLO (id 0, JSON), SPAWNED (empty: an EXEC's process exists, before any of its
#   output), OUT, ERR (output chunks <= 256 KiB), EXIT (JSON: code, pids, listening; then, when the EXEC
#   asked, the listening sockets' records as in a FILE `listening` answer), FAIL (JSON: the process
#   could not be started: errno, error), DATA (a file's bytes, <= 256 KiB each, before the) RESULT
#   (JSON), CONNECTED (JSON: family), CREDIT (u32: bytes of a connection's input written to the app).
#   JSON payloads are u32 length, JSON text, then bytes. HELLO's `spawned: true` says SPAWNED comes:
#   a stream lost before it means the command never started, and the server may run it again.
# Each request's output is pumped by its own task and every frame write awaits the transport's
# drain, so one command that prints gigabytes cannot starve the others on the stream. The agent
# holds no privilege: everything it does, `assistant` could do with a shell. The server treats what
# it says as untrusted.
#
# The socket's handshake is in cubicle_socket.py (imported only with --connect), the egress relay in
# cubicle_egress.py (only with CUBICLE_EGRESS_PORT), file operations in cubicle_files.py and TCP
# connections in cubicle_connect.py (imported at their first request: the start, on a new chat's first
# call, imports only what the first command needs).
import asyncio
import json
import os
import signal
import struct
import subprocess

VERSION = 1
T_EXEC, T_STDIN, T_STDIN_END, T_CLOSE, T_FILE, T_CONNECT = 16, 17, 18, 19, 20, 21
T_HELLO, T_OUT, T_ERR, T_EXIT, T_FAIL, T_RESULT, T_DATA, T_SPAWNED = 1, 2, 3, 4, 5, 6, 7, 10
CHUNK = 256 * 1024
MAX_IN = 8 * 1024 * 1024 + 16
# After bash exits (command mode): return once its output has been quiet this long, or at most
# DRAIN after the exit, even while background children hold the output open (as the exec path).
QUIET, DRAIN = 0.2, 1.0
# Collecting mode: like the engine, stop waiting for output this long after the process exited.
EXEC_DRAIN = 2.0
# What a process wrote before it exited and we had not sent yet (pipe buffer, reader buffer, the
# chunk in hand) is at most about this much. While that backlog waits for our own stream (the
# server reads slowly, or other requests' output goes first), the QUIET/DRAIN clocks stand still:
# they judge the process's background children, not our stream. Output beyond it is theirs.
EXIT_BACKLOG = 2 * 1024 * 1024
HEADER = struct.Struct('>IIB')


class Agent:
    def __init__(self, writer):
        self.writer = writer
        self.reqs = {}
        # CONNECT requests (cubicle_connect.Connection) by id
        self.conns = {}
        self.lock = asyncio.Lock()
        # the stream ended: nothing more is sent, every request is being closed
        self.lost = False

    async def send(self, rid, typ, payload=b''):
        async with self.lock:
            if self.lost:
                return
            try:
                self.writer.write(HEADER.pack(len(payload) + 5, rid, typ) + payload)
                await self.writer.drain()
            except (ConnectionError, OSError):
                self.lose()

    def lose(self):
        # The server went away: every request stops reading its process (as a CLOSE would).
        self.lost = True
        for req in list(self.reqs.values()) + list(self.conns.values()):
            req.closed.set()

    def send_now(self, rid, typ):
        # An empty frame written at once, ahead of the frames waiting for the lock (the transport takes
        # whole writes, so frames never interleave): SPAWNED leaves as soon as the process exists.
        if self.lost:
            return
        try:
            self.writer.write(HEADER.pack(5, rid, typ))
        except (ConnectionError, OSError):
            self.lose()

    async def send_json(self, rid, typ, obj, data=b''):
        body = json.dumps(obj, separators=(',', ':')).encode()
        await self.send(rid, typ, struct.pack('>I', len(body)) + body + data)

    def dispatch(self, rid, typ, payload):
        if typ == T_EXEC:
            if rid in self.reqs or rid == 0:
                return
            req = Request(self, rid)
            self.reqs[rid] = req
            asyncio.ensure_future(req.run(payload))
        elif typ == T_FILE:
            asyncio.ensure_future(self.file_op(rid, payload))
        elif typ == T_CONNECT:
            asyncio.ensure_future(self.connect(rid, payload))
        else:
            req = self.reqs.get(rid) or self.conns.get(rid)
            if req is not None:
                req.control(typ, payload)

    async def connect(self, rid, payload):
        try:
            spec, _ = unpack(payload)
        except (ValueError, struct.error) as e:
            await self.send_json(rid, T_FAIL, {'errno': 0, 'error': str(e)[:300]})
            return
        if not isinstance(spec, dict):
            await self.send_json(rid, T_FAIL, {'errno': 0, 'error': 'CONNECT takes an object'})
            return
        from cubicle_connect import open_connection
        await open_connection(self, rid, spec)

    async def file_op(self, rid, payload):
        try:
            from cubicle_files import handle
            req, data = unpack(payload)
            obj, data = handle(req, data)
        except Exception as e:  # noqa: BLE001 (every failure becomes an answer)
            obj, data = {'ok': False, 'errno': getattr(e, 'errno', None) or 0, 'error': str(e)[:300]}, b''
        for at in range(0, len(data), CHUNK):
            await self.send(rid, T_DATA, data[at:at + CHUNK])
        await self.send_json(rid, T_RESULT, obj)


class Request:
    def __init__(self, agent, rid):
        self.agent = agent
        self.rid = rid
        self.proc = None
        self.stdin = asyncio.Queue()
        self.closed = asyncio.Event()
        self.last_out = 0.0
        # bytes read from the process's pipes; pumps waiting for the stream right now
        self.read_bytes = 0
        self.sending = 0

    def control(self, typ, payload):
        if typ == T_STDIN:
            self.stdin.put_nowait(payload)
        elif typ == T_STDIN_END:
            self.stdin.put_nowait(None)
        elif typ == T_CLOSE:
            self.closed.set()

    async def run(self, payload):
        try:
            spec, _ = unpack(payload)
            await self.execute(spec)
        except (ValueError, KeyError, TypeError) as e:
            await self.agent.send_json(self.rid, T_FAIL, {'errno': 0, 'error': str(e)[:300]})
        finally:
            self.agent.reqs.pop(self.rid, None)

    async def execute(self, spec):
        merged = spec.get('merged') is True
        want_stdin = spec.get('stdin') is True
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in (spec.get('env') or {}).items()})
        if self.agent.lost:
            # The stream is gone already: nothing is started (the server takes the request as never started).
            return
        try:
            # Popen, not asyncio's subprocess: its wait() also waits for the pipes, which background
            # children may hold open for ever. The exit is watched through a pidfd instead.
            proc = subprocess.Popen(
                [str(a) for a in spec['argv']], cwd=spec.get('cwd') or None, env=env, bufsize=0,
                stdin=subprocess.PIPE if want_stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merged else subprocess.PIPE, start_new_session=True)
        except OSError as e:
            await self.agent.send_json(self.rid, T_FAIL, {'errno': e.errno or 0, 'error': (e.strerror or str(e))[:300]})
            return
        except Exception as e:  # noqa: BLE001
            await self.agent.send_json(self.rid, T_FAIL, {'errno': 0, 'error': str(e)[:300]})
            return
        self.proc = proc
        self.agent.send_now(self.rid, T_SPAWNED)
        loop = asyncio.get_running_loop()
        self.last_out = loop.time()
        transports = []
        pumps = []
        for pipe, typ in ((proc.stdout, T_OUT), (proc.stderr, T_ERR)):
            if pipe is None:
                continue
            reader = asyncio.StreamReader(limit=CHUNK)
            tr, _ = await loop.connect_read_pipe(lambda r=reader: asyncio.StreamReaderProtocol(r), pipe)
            transports.append(tr)
            pumps.append(asyncio.ensure_future(self.pump(reader, typ)))
        feeder = None
        if want_stdin:
            wt, wp = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, proc.stdin)
            transports.append(wt)
            feeder = asyncio.ensure_future(self.feed(asyncio.StreamWriter(wt, wp, None, loop)))
        waiter = asyncio.ensure_future(wait_exit(proc, loop))
        closer = asyncio.ensure_future(self.closed.wait())
        await asyncio.wait([waiter, closer], return_when=asyncio.FIRST_COMPLETED)
        code = None
        if waiter.done():
            rc = waiter.result()
            code = 128 - rc if rc < 0 else rc
            await self.settle(pumps, merged, loop)
        for t in pumps + [feeder, closer, waiter]:
            if t is not None:
                t.cancel()
        # Our end of the pipes closes: writers still holding them get EPIPE, as with a closed exec.
        for tr in transports:
            tr.close()
        info, data = {'code': code}, b''
        if merged and code is not None:
            info['pids'] = read_pids()
            # The sandbox's listening sockets after the command, when asked (`listening`: at most that many):
            # the server's next question after every bash_tool command, answered without a round trip.
            want = spec.get('listening')
            if type(want) is int and want > 0:
                from cubicle_files import handle
                listed, records = handle({'op': 'listening', 'max': want})
                if listed.get('ok') is True:
                    info['listening'], data = {'more': listed['more']}, records
        await self.agent.send_json(self.rid, T_EXIT, info, data)

    async def settle(self, pumps, merged, loop):
        # Wait for the output: at once when every pipe reached EOF, else until quiet (command
        # mode) or EXEC_DRAIN (collecting mode) while background children hold it open. Time spent
        # waiting for our own stream with the exit's backlog unsent does not count (EXIT_BACKLOG).
        budget = DRAIN if merged else EXEC_DRAIN
        backlog_end = self.read_bytes + EXIT_BACKLOG
        last = loop.time()
        while not all(p.done() for p in pumps) and not self.closed.is_set():
            now = loop.time()
            excused = self.sending > 0 and self.read_bytes <= backlog_end
            if excused:
                self.last_out = now
            else:
                budget -= now - last
            last = now
            left = budget
            if merged:
                left = min(left, self.last_out + QUIET - now)
            if excused:
                left = max(left, 0.05)
            elif left <= 0:
                return
            await asyncio.wait(pumps, timeout=min(left, 0.05) if excused else left)

    async def pump(self, stream, typ):
        loop = asyncio.get_running_loop()
        while True:
            data = await stream.read(CHUNK)
            if not data:
                return
            self.read_bytes += len(data)
            self.last_out = loop.time()
            self.sending += 1
            try:
                await self.agent.send(self.rid, typ, data)
            finally:
                self.sending -= 1
            self.last_out = loop.time()

    async def feed(self, w):
        try:
            while True:
                data = await self.stdin.get()
                if data is None:
                    break
                w.write(data)
                await w.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            try:
                w.close()
            except Exception:  # noqa: BLE001
                pass


async def wait_exit(proc, loop):
    # The exit status as soon as the process ends (pidfd readable), or by polling where the
    # kernel has no pidfd. Reaps only this pid.
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        while proc.poll() is None:
            await asyncio.sleep(0.02)
        return proc.returncode
    done = loop.create_future()

    def ready():
        if proc.poll() is not None and not done.done():
            done.set_result(proc.returncode)
    loop.add_reader(pidfd, ready)
    try:
        ready()
        return await done
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


def unpack(payload):
    # JSON payloads: u32 length of the JSON text, the JSON text, then bytes (FILE write data).
    (n,) = struct.unpack_from('>I', payload)
    return json.loads(payload[4:4 + n]), payload[4 + n:]


def read_pids():
    for p in ('/sys/fs/cgroup/pids.current', '/sys/fs/cgroup/pids/pids.current'):
        try:
            with open(p) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            continue
    return None


async def serve(reader, writer):
    # One stream: HELLO, then requests until it ends (the requests are then closed).
    agent = Agent(writer)
    # connect: this agent serves CONNECT (an older one ignores it, so the server asks only when told);
    # spawned: it answers every EXEC whose process started with SPAWNED first (an older one never does);
    # uid, gid: the user it runs commands as (the server's ready probe then needs no `id`).
    await agent.send_json(0, T_HELLO, {'v': VERSION, 'pid': os.getpid(), 'connect': True, 'spawned': True,
                                       'uid': os.getuid(), 'gid': os.getgid()})
    try:
        while True:
            try:
                head = await reader.readexactly(9)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            length, rid, typ = HEADER.unpack(head)
            if length < 5 or length > MAX_IN:
                return
            try:
                payload = await reader.readexactly(length - 5)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            agent.dispatch(rid, typ, payload)
    finally:
        agent.lose()


async def main():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_IN)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, 'rb', 0))
    wt, wp = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(1, 'wb', 0))
    await serve(reader, asyncio.StreamWriter(wt, wp, None, loop))


async def with_egress(port, path, serving):
    # The egress relay listens before HELLO, so the first command finds its way out (cubicle_egress.py).
    if port:
        from cubicle_egress import start
        await start(port, path or '/run/cubicle-agent/egress.sock')
    await serving()


def run(argv):
    # argv: ['--connect', PATH] (the engine's socket), or nothing (stdin/stdout, the exec fallback).
    # CUBICLE_EGRESS_PORT (set by the server when the sandbox's egress goes through the agent): the relay
    # runs either way, so an agent started again over exec takes it up when the entrypoint's is gone.
    port = os.environ.get('CUBICLE_EGRESS_PORT')
    path = os.environ.get('CUBICLE_EGRESS_SOCKET')
    try:
        if len(argv) == 2 and argv[0] == '--connect':
            from cubicle_socket import connect_loop
            # SIGPIPE stays ignored: a write to a stream the server closed is an error, not our end.
            asyncio.run(with_egress(port, path, lambda: connect_loop(argv[1], MAX_IN, serve)))
        else:
            # Without the relay, a write to a closed stdout ends the agent. With it SIGPIPE stays ignored: a
            # relayed connection the client reset must not kill the agent (stdin's end still ends it).
            if not port:
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            asyncio.run(with_egress(port, path, main))
    except KeyboardInterrupt:
        pass
