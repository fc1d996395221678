"""The operator plane: read-only serving of ``exports.files`` under /resources/files.

Every path is walked from the door's working directory one component at a
time, each opened relative to its parent's descriptor with ``O_NOFOLLOW``,
so no symlink is ever followed and no ``..`` is ever resolved: a request
that would leave the root is refused, never normalised into something
servable. The door applies no kernel containment to its agent, so it
reports the class ``advisory``, and holds symlinks to the strict rule murmur
gives ``scoped``: a symlink on the path is refused, and omitted from a listing.
"""
from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
from typing import Callable

from murmur_wsgi.errors import PlaneRefusal
from murmur_wsgi.manifest import ManifestError
from murmur_wsgi.uris import FILES_PLANE

logger = logging.getLogger(__name__)

CONTAINMENT = "advisory"
CHUNK = 1 << 20
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

REFUSALS = {
    "no_resource_plane": (404, "this capsule declares no operator plane"),
    "not_found": (404, "nothing under the export root answers to this path"),
    "outside_root": (403, "the path leaves the export root"),
    "symlink_refused": (403, "the path passes through a symlink, which this plane does not follow"),
    "not_a_regular_file": (403, "the path names a directory, fifo, socket or device, not a file"),
    "too_large": (413, "the file is larger than exports.files.max_bytes"),
    "method_not_allowed": (405, "the operator plane is read-only: it answers GET only"),
    "io_error": (500, "the file could not be read"),
}


def refuse(code: str) -> PlaneRefusal:
    """The plane's refusal ``code``, with its status and sentence."""
    status, message = REFUSALS[code]
    headers = [("Allow", "GET")] if code == "method_not_allowed" else None
    return PlaneRefusal(status, code, message, headers)


def root_parts(root: str) -> list[str]:
    """The components of ``exports.files.root`` below the working directory."""
    return [part for part in root.split("/") if part not in ("", ".")]


def check_root(files: dict | None, workdir: str) -> None:
    """Refuse at launch a declared root reached through a symlink (murmur's E-CAP-007)."""
    if not files:
        return
    path = workdir
    for part in root_parts(files["root"]):
        path = os.path.join(path, part)
        if os.path.islink(path):
            raise ManifestError(f"exports.files.root: '{files['root']}' passes through the "
                                f"symlink {part}; the operator plane follows no symlink")


def finished_tasks(session) -> int:
    """The generation: tasks that reached a terminal state in this process."""
    return session.store.finished_total


def _header(value: str) -> str:
    """A header value: the text's UTF-8 bytes, as WSGI carries bytes (latin-1)."""
    return value.encode("utf-8", "surrogateescape").decode("latin-1")


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _enter(dir_fd: int, name: str) -> int | None:
    """Open the directory ``name`` under ``dir_fd`` without following a symlink.

    Returns None when nothing by that name is a directory; raises
    ``symlink_refused`` on a symlink, ``io_error`` on any other failure.
    """
    st = _lstat(name, dir_fd)
    if st is None or not (stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        return None
    if stat.S_ISLNK(st.st_mode):
        raise refuse("symlink_refused")
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as ex:
        if ex.errno in (errno.ELOOP, errno.EMLINK):
            raise refuse("symlink_refused") from None
        if ex.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        logger.warning("operator plane: cannot open a directory: %s", ex.strerror)
        raise refuse("io_error") from None


def _read_all(fd: int, limit: int | None) -> tuple[bytes | None, str, int]:
    """Read a descriptor to its end: (bytes or None past ``limit``, sha256 hex, size)."""
    digest = hashlib.sha256()
    chunks, size = [], 0
    while True:
        chunk = os.read(fd, CHUNK)
        if not chunk:
            break
        digest.update(chunk)
        size += len(chunk)
        if limit is not None:
            if size > limit:
                return None, "", size
            chunks.append(chunk)
    return (b"".join(chunks) if limit is not None else None), digest.hexdigest(), size


def split_path(rel: str) -> list[str]:
    """The components of a request's path, or ``outside_root`` for one that may not be served."""
    try:
        rel = rel.encode("latin-1").decode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        pass                                        # a server that already decoded the text
    parts = rel.split("/")
    if not rel or "\x00" in rel or any(part in ("", ".", "..") for part in parts):
        raise refuse("outside_root")
    return parts


class FilesPlane:
    """``GET /resources/files`` (the listing) and ``GET /resources/files/<relpath>``."""

    def __init__(self, files: dict, workdir: str, generation: Callable[[], int] = lambda: 0):
        self.root = files["root"]
        self.mode = files["mode"]
        self.max_bytes = files["max_bytes"]
        self.workdir = workdir
        self._parts = root_parts(self.root)
        self._generation = generation

    def serve(self, environ: dict) -> tuple[str, list, bytes]:
        """Answer one request under /resources/ as (status, headers, body)."""
        if environ.get("REQUEST_METHOD") != "GET":
            raise refuse("method_not_allowed")
        path = environ.get("PATH_INFO", "")
        if path == FILES_PLANE:
            return self.listing()
        if not path.startswith(FILES_PLANE + "/"):
            raise refuse("not_found")
        return self.read(path[len(FILES_PLANE) + 1:])

    # --- the root ----------------------------------------------------------

    def _open_root(self) -> int | None:
        """A descriptor on the export root, or None when it does not exist."""
        try:
            fd = os.open(self.workdir, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
        except OSError as ex:
            logger.warning("operator plane: cannot open the workdir: %s", ex.strerror)
            raise refuse("io_error") from None
        for part in self._parts:
            try:
                child = _enter(fd, part)
            finally:
                os.close(fd)
            if child is None:
                return None
            fd = child
        return fd

    # --- the listing -------------------------------------------------------

    def listing(self) -> tuple[str, list, bytes]:
        entries: list[dict] = []
        fd = self._open_root()
        if fd is not None:
            try:
                self._walk(fd, "", entries)
            except OSError as ex:
                logger.warning("operator plane: listing failed: %s", ex.strerror)
                raise refuse("io_error") from None
            finally:
                os.close(fd)
        entries.sort(key=lambda entry: entry["path"])
        body = _dumps({"root": self.root, "mode": self.mode, "max_bytes": self.max_bytes,
                       "generation": self._generation(), "containment_achieved": CONTAINMENT,
                       "entries": entries}).encode()
        return "200 OK", [("Content-Type", "application/json"),
                          ("Content-Length", str(len(body)))], body

    def _walk(self, dir_fd: int, prefix: str, out: list) -> None:
        """Append every regular file under ``dir_fd``; symlinks and specials are left out."""
        for name in os.listdir(dir_fd):
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                logger.warning("operator plane: a file name that is not UTF-8 is not listed")
                continue
            st = _lstat(name, dir_fd)
            if st is None:
                continue                            # removed while we listed
            if stat.S_ISDIR(st.st_mode):
                child = _open_quiet(name, DIR_FLAGS, dir_fd)
                if child is not None:
                    try:
                        self._walk(child, f"{prefix}{name}/", out)
                    finally:
                        os.close(child)
            elif stat.S_ISREG(st.st_mode):
                fd = _open_quiet(name, FILE_FLAGS, dir_fd)
                if fd is None:
                    continue
                try:
                    fst = os.fstat(fd)
                    if stat.S_ISREG(fst.st_mode):
                        _, sha, size = _read_all(fd, None)
                        out.append({"path": prefix + name, "size_bytes": size,
                                    "mtime_ms": fst.st_mtime_ns // 1_000_000, "sha256": sha})
                finally:
                    os.close(fd)

    # --- one file ----------------------------------------------------------

    def read(self, rel: str) -> tuple[str, list, bytes]:
        parts = split_path(rel)
        fd = self._open_root()
        if fd is None:
            raise refuse("not_found")
        try:
            for part in parts[:-1]:
                child = _enter(fd, part)
                os.close(fd)
                fd = child
                if fd is None:
                    raise refuse("not_found")
            data, sha, mtime_ms = self._read_file(fd, parts[-1])
        finally:
            if fd is not None:
                os.close(fd)
        headers = [("Content-Type", "application/octet-stream"),
                   ("Content-Length", str(len(data))),
                   ("ETag", f'"sha256:{sha}"'),
                   ("X-Murmur-Mtime-Ms", str(mtime_ms)),
                   ("X-Murmur-Generation", str(self._generation())),
                   ("X-Murmur-Containment", CONTAINMENT),
                   ("X-Murmur-Export-Root", _header(self.root))]
        return "200 OK", headers, data

    def _read_file(self, dir_fd: int, name: str) -> tuple[bytes, str, int]:
        """Open ``name`` with O_NOFOLLOW and read it whole from that one descriptor."""
        st = _lstat(name, dir_fd)
        if st is None:
            raise refuse("not_found")
        if stat.S_ISLNK(st.st_mode):
            raise refuse("symlink_refused")
        if not stat.S_ISREG(st.st_mode):
            raise refuse("not_a_regular_file")
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
        except OSError as ex:
            if ex.errno in (errno.ELOOP, errno.EMLINK):
                raise refuse("symlink_refused") from None
            if ex.errno in (errno.ENOENT, errno.ENOTDIR):
                raise refuse("not_found") from None
            logger.warning("operator plane: cannot open a file: %s", ex.strerror)
            raise refuse("io_error") from None
        try:
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode):
                raise refuse("not_a_regular_file")
            if fst.st_size > self.max_bytes:
                raise refuse("too_large")
            data, sha, _ = _read_all(fd, self.max_bytes)
        except OSError as ex:
            logger.warning("operator plane: cannot read a file: %s", ex.strerror)
            raise refuse("io_error") from None
        finally:
            os.close(fd)
        if data is None:
            raise refuse("too_large")               # it grew past the limit as we read
        return data, sha, fst.st_mtime_ns // 1_000_000


def _open_quiet(name: str, flags: int, dir_fd: int) -> int | None:
    """Open for the listing; an entry that vanished or turned into a symlink is skipped."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as ex:
        if ex.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EMLINK):
            return None
        raise
