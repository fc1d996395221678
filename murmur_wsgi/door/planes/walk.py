"""The operator plane's listing: a bounded walk of the export root, without recursion.

``scan`` runs off gevent's loop (``murmur_wsgi/off_loop.py``), so it takes no lock and
logs nothing: what the caller must log or cache comes back in the ``Listing``.
Each directory is opened relative to its parent's descriptor with
``O_NOFOLLOW``; a directory's descriptor stays open only while its
subdirectories wait on the stack, so a walk holds at most ``max_depth + 1``
descriptors. A walk that meets its bounds stops there and says ``truncated``.
"""
from __future__ import annotations

import dataclasses
import errno
import os
import stat
import time

from murmur_wsgi.door.planes.digests import DigestCache, file_key, hash_fd

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC


@dataclasses.dataclass(frozen=True)
class Bounds:
    """``exports.files``' limits on one listing."""

    max_bytes: int              # a larger file is listed unhashed, never opened
    max_depth: int              # the most path components a listed entry has
    max_entries: int            # the most directory entries (of any kind) a walk examines


@dataclasses.dataclass
class Listing:
    """What a walk found, and what its caller logs and caches."""

    entries: list[dict] = dataclasses.field(default_factory=list)
    truncated: bool = False
    examined: int = 0
    fresh: list[tuple] = dataclasses.field(default_factory=list)    # (key, sha256, began ns)
    used: list[tuple] = dataclasses.field(default_factory=list)     # cached keys it used
    not_utf8: int = 0                                               # names left out


@dataclasses.dataclass
class _Dir:
    fd: int
    prefix: str
    depth: int                  # path components of ``prefix``
    subdirs: list[str] = dataclasses.field(default_factory=list)


def open_quiet(name: str, flags: int, dir_fd: int) -> int | None:
    """Open for the listing; an entry that vanished or turned into a symlink is skipped."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as ex:
        if ex.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EMLINK):
            return None
        raise


def scan(root_fd: int, bounds: Bounds, digests: DigestCache) -> Listing:
    """Walk the directory ``root_fd`` (closed when done): its regular files, unsorted."""
    out = Listing()
    stack = [_Dir(root_fd, "", 0)]
    try:
        going = _read_dir(stack[0], bounds, digests, out)
        while going and stack:
            top = stack[-1]
            if not top.subdirs:
                os.close(stack.pop().fd)
                continue
            name = top.subdirs.pop()
            fd = open_quiet(name, DIR_FLAGS, top.fd)
            if fd is not None:
                stack.append(_Dir(fd, f"{top.prefix}{name}/", top.depth + 1))
                going = _read_dir(stack[-1], bounds, digests, out)
    finally:
        for left in stack:
            os.close(left.fd)
    return out


def _read_dir(where: _Dir, bounds: Bounds, digests: DigestCache, out: Listing) -> bool:
    """List one directory's files and queue its subdirectories; False once the walk is full."""
    with os.scandir(where.fd) as names:
        for item in names:
            if out.examined >= bounds.max_entries:
                out.truncated = True
                return False
            out.examined += 1
            try:
                item.name.encode("utf-8")
            except UnicodeEncodeError:
                out.not_utf8 += 1
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                continue                            # removed while we listed
            if stat.S_ISDIR(st.st_mode):
                if where.depth + 1 < bounds.max_depth:
                    where.subdirs.append(item.name)
                else:
                    out.truncated = True            # its entries lie past max_depth
            elif stat.S_ISREG(st.st_mode):
                _list_file(where, item.name, st, bounds, digests, out)
    return True


def _list_file(where: _Dir, name: str, st: os.stat_result, bounds: Bounds,
               digests: DigestCache, out: Listing) -> None:
    """Append one regular file; hash it unless it is over max_bytes or its digest is known."""
    path = where.prefix + name
    if st.st_size > bounds.max_bytes:
        out.entries.append(_entry(path, st.st_size, st, None))   # never opened
        return
    fd = open_quiet(name, FILE_FLAGS, where.fd)
    if fd is None:
        return
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode):
            return                                  # swapped for a fifo or a device
        key = file_key(fst)
        sha, size = digests.peek(key), fst.st_size
        if sha is not None:
            out.used.append(key)
        elif size <= bounds.max_bytes:
            began = time.time_ns()
            sha, read = hash_fd(fd, bounds.max_bytes)
            if sha is not None:
                size = read
                if read == fst.st_size:
                    out.fresh.append((key, sha, began))
        out.entries.append(_entry(path, size, fst, sha))
    finally:
        os.close(fd)


def _entry(path: str, size: int, st: os.stat_result, sha: str | None) -> dict:
    return {"path": path, "size_bytes": size, "mtime_ms": st.st_mtime_ns // 1_000_000,
            "sha256": sha}
