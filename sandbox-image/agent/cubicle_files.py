# File operations of cubicle-agent (FILE requests), run as `assistant` with its permissions only,
# and the sandbox's listening TCP sockets (op `listening`). Answers are (json, data). Nothing here is
# trusted by the server: it re-checks sizes, kinds and records.
import os
import socket
import stat
import struct

KINDS = {stat.S_IFREG: 'file', stat.S_IFDIR: 'dir', stat.S_IFIFO: 'fifo', stat.S_IFSOCK: 'socket',
         stat.S_IFCHR: 'char', stat.S_IFBLK: 'block', stat.S_IFLNK: 'link'}
MAX_READ = 8 * 1024 * 1024
MAX_LIST = 10000
# op `listening`: records of LISTENING_RECORD bytes (u8 family 4|6, u8 0, u16 port, 16 address bytes, all
# network order; an IPv4 address in the first 4), at most `max` of them (MAX_LISTENING).
MAX_LISTENING = 4096
LISTENING_RECORD = struct.Struct('>BBH16s')
NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY = 4, 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLMSG = struct.Struct('=IHHII')
TCP_LISTEN = 10
# inet_diag_msg: family, state, timer, retrans, then the socket id: sport, dport (network order), src[16]
DIAG_MSG_MIN = 72


def fail(e):
    return {'ok': False, 'errno': e.errno or 0, 'error': (e.strerror or str(e))[:300]}, b''


def describe(st):
    return {'kind': KINDS.get(stat.S_IFMT(st.st_mode), 'other'), 'size': st.st_size,
            'mode': stat.S_IMODE(st.st_mode), 'mtime': int(st.st_mtime)}


def op_stat(req):
    # Follows symlinks like `stat -L`; `link` says whether the path itself is one.
    path = req['path']
    link = os.path.islink(path)
    return dict(ok=True, link=link, **describe(os.stat(path))), b''


def op_read(req):
    # Regular files only, opened non-blocking (a FIFO never blocks the agent), at most `max` bytes
    # from `offset` (negative: from the end).
    path, limit, offset = req['path'], min(int(req.get('max', MAX_READ)), MAX_READ), int(req.get('offset', 0))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return dict(ok=False, errno=0, error='not a regular file', **describe(st)), b''
        start = max(0, st.st_size + offset) if offset < 0 else offset
        chunks, left = [], limit
        while left > 0:
            b = os.pread(fd, min(left, 1024 * 1024), start)
            if not b:
                break
            chunks.append(b)
            start += len(b)
            left -= len(b)
        return dict(ok=True, **describe(st)), b''.join(chunks)
    finally:
        os.close(fd)


def op_list(req):
    # One directory level, names and kinds (lstat: links are reported as links), at most MAX_LIST.
    path, out, more = req['path'], [], False
    with os.scandir(path) as it:
        for e in it:
            if len(out) >= MAX_LIST:
                more = True
                break
            try:
                st = e.stat(follow_symlinks=False)
                out.append([e.name, KINDS.get(stat.S_IFMT(st.st_mode), 'other'), st.st_size])
            except OSError:
                out.append([e.name, 'other', 0])
    return {'ok': True, 'entries': out, 'more': more}, b''


def op_write(req, data):
    # Atomic like the exec path's script: a temp file in the same directory, mode of the old file
    # kept (0644 for a new one), then rename; a symlink is resolved first. Returns whether a file
    # was replaced. Parents are created.
    target = req['path']
    if os.path.islink(target):
        target = os.path.realpath(target)
    if os.path.isdir(target):
        return {'ok': False, 'errno': 21, 'error': 'Is a directory'}, b''
    d = os.path.dirname(target) or '/'
    os.makedirs(d, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
        existed = True
    except FileNotFoundError:
        mode, existed = 0o644, False
    tmp = os.path.join(d, '.cubicle-write.' + os.urandom(6).hex())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.close(fd)
        fd = -1
        os.rename(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return {'ok': True, 'existed': existed}, b''


def op_listening(req):
    # The TCP sockets in LISTEN state of the sandbox's network namespace, from the kernel's sock_diag
    # netlink dump. A dump of LISTEN only walks the listening hash; /proc/net/tcp walks the whole
    # established hash of the host's kernel on every read, milliseconds on a large machine, and this
    # runs after every bash_tool command (docs/performance.md).
    limit = max(0, min(int(req.get('max', MAX_LISTENING)), MAX_LISTENING))
    out, more = [], False
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_SOCK_DIAG) as s:
        s.settimeout(1.0)
        for seq, (family, tag, size) in enumerate(((socket.AF_INET, 4, 4), (socket.AF_INET6, 6, 16)), 1):
            # inet_diag_req_v2: family, protocol, ext, pad, states, then a zero socket id (48 bytes)
            body = struct.pack('=BBBBI', family, socket.IPPROTO_TCP, 0, 0, 1 << TCP_LISTEN) + bytes(48)
            s.send(NLMSG.pack(NLMSG.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body)
            done = False
            while not done:
                data = s.recv(65536)
                if not data:
                    raise OSError(0, 'netlink dump ended early')
                at = 0
                while at + NLMSG.size <= len(data):
                    length, typ, _flags, got_seq, _pid = NLMSG.unpack_from(data, at)
                    if length < NLMSG.size or at + length > len(data):
                        raise OSError(0, 'malformed netlink message')
                    if got_seq == seq:
                        if typ == NLMSG_DONE:
                            done = True
                            break
                        if typ == NLMSG_ERROR:
                            (err,) = struct.unpack_from('=i', data, at + NLMSG.size)
                            raise OSError(-err, os.strerror(-err))
                        body_at = at + NLMSG.size
                        if typ == SOCK_DIAG_BY_FAMILY and length - NLMSG.size >= DIAG_MSG_MIN and data[body_at] == family \
                                and data[body_at + 1] == TCP_LISTEN:
                            if len(out) >= limit:
                                more = True
                            else:
                                (port,) = struct.unpack_from('>H', data, body_at + 4)
                                addr = data[body_at + 8:body_at + 8 + size]
                                out.append(LISTENING_RECORD.pack(tag, 0, port, addr + bytes(16 - size)))
                    at += (length + 3) & ~3
    return {'ok': True, 'more': more}, b''.join(out)


def handle(req, data=b''):
    try:
        op = req.get('op')
        if op == 'stat':
            return op_stat(req)
        if op == 'read':
            return op_read(req)
        if op == 'list':
            return op_list(req)
        if op == 'write':
            return op_write(req, data)
        if op == 'listening':
            return op_listening(req)
        return {'ok': False, 'errno': 0, 'error': 'unknown operation'}, b''
    except OSError as e:
        return fail(e)
