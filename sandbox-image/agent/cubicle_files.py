# File operations of cubicle-agent (FILE requests), run as `assistant` with its permissions only.
# Answers are (json, data). Nothing here is trusted by the server: it re-checks sizes and kinds.
import os
import stat

KINDS = {stat.S_IFREG: 'file', stat.S_IFDIR: 'dir', stat.S_IFIFO: 'fifo', stat.S_IFSOCK: 'socket',
         stat.S_IFCHR: 'char', stat.S_IFBLK: 'block', stat.S_IFLNK: 'link'}
MAX_READ = 8 * 1024 * 1024
MAX_LIST = 10000


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
        return {'ok': False, 'errno': 0, 'error': 'unknown operation'}, b''
    except OSError as e:
        return fail(e)
