"""The operator plane: read-only serving of ``exports.files`` under /resources/files.

Every path is walked from the door's working directory one component at a
time, each opened relative to its parent's descriptor with ``O_NOFOLLOW``,
so no symlink is ever followed and no ``..`` is ever resolved: a request
that would leave the root is refused, never normalised into something
servable. The door applies no kernel containment to its agent, so it
reports the class ``advisory``, and holds symlinks to the strict rule murmur
gives ``scoped``: a symlink on the path is refused, and omitted from a listing.

Nothing here holds the gevent hub for long: a listing's walk and a file's
first digest run off it (``murmur_wsgi/off_loop.py``), a digest is hashed once per
version of a file, and a read is streamed from its descriptor in chunks.
"""
from __future__ import annotations

import errno
import logging
import os
import stat
from typing import Callable

from werkzeug.http import parse_etags

from murmur_wsgi.errors import PlaneRefusal
from murmur_wsgi.door.manifest import ManifestError
from murmur_wsgi.door.planes.digests import DigestCache, file_key
from murmur_wsgi.off_loop import off_loop
from murmur_wsgi.door.planes.walk import DIR_FLAGS, FILE_FLAGS, Bounds, scan
from murmur_wsgi.uris import FILES_PLANE
from murmur_wsgi.wire.encode import compact_utf8

logger = logging.getLogger(__name__)

CONTAINMENT = "advisory"
SEND_CHUNK = 256 * 1024         # bytes of a read per write to the client
READ_ATTEMPTS = 2               # hashings of a file that changes meanwhile, before io_error
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

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
    """``name``'s lstat under ``dir_fd``, or None when nothing by that name is there (a
    name longer than the filesystem's NAME_MAX, 255 bytes, names nothing)."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as ex:
        if ex.errno == errno.ENAMETOOLONG:
            return None
        raise


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
        self.bounds = Bounds(files["max_bytes"], files["max_depth"], files["max_entries"])
        self.workdir = workdir
        self.digests = DigestCache(files["max_entries"])
        self._parts = root_parts(self.root)
        self._generation = generation

    def serve(self, environ: dict) -> tuple[str, list, bytes | FileBody]:
        """Answer one request under /resources/ as (status, headers, body)."""
        if environ.get("REQUEST_METHOD") != "GET":
            raise refuse("method_not_allowed")
        path = environ.get("PATH_INFO", "")
        if path == FILES_PLANE:
            return self.listing()
        if not path.startswith(FILES_PLANE + "/"):
            raise refuse("not_found")
        return self.read(path[len(FILES_PLANE) + 1:], environ.get("HTTP_IF_NONE_MATCH"))

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
        """Every regular file under the root, sorted by path, within ``self.bounds``."""
        fd = self._open_root()
        if fd is None:
            entries, truncated = [], False
        else:
            try:
                found = off_loop(scan, fd, self.bounds, self.digests)     # scan closes fd
            except OSError as ex:
                logger.warning("operator plane: listing failed: %s", ex.strerror)
                raise refuse("io_error") from None
            self.digests.remember(found.fresh, found.used)
            if found.not_utf8:
                logger.warning("operator plane: %d file names that are not UTF-8 are not "
                               "listed", found.not_utf8)
            if found.truncated:
                logger.info("operator plane: the listing stopped at its bounds (%d entries "
                            "examined)", found.examined)
            entries, truncated = found.entries, found.truncated
        entries.sort(key=lambda entry: entry["path"])
        listing = {"root": self.root, "mode": self.mode, "max_bytes": self.max_bytes,
                   "generation": self._generation(), "containment_achieved": CONTAINMENT}
        if truncated:
            listing["truncated"] = True
        listing["entries"] = entries
        body = compact_utf8(listing).encode()
        return "200 OK", [("Content-Type", "application/json"),
                          ("Content-Length", str(len(body)))], body

    # --- one file ----------------------------------------------------------

    def read(self, rel: str, if_none_match: str | None = None) -> tuple[str, list, FileBody]:
        """One file's bytes, streamed; ``304`` when ``if_none_match`` names its ETag."""
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
            file_fd = self._open_file(fd, parts[-1])
        finally:
            if fd is not None:
                os.close(fd)
        body = FileBody(file_fd)
        try:
            sha = self._digest(body)
        except BaseException:
            body.close()
            raise
        headers = [("ETag", f'"sha256:{sha}"'),
                   ("X-Murmur-Mtime-Ms", str(body.key[3] // 1_000_000)),
                   ("X-Murmur-Generation", str(self._generation())),
                   ("X-Murmur-Containment", CONTAINMENT),
                   ("X-Murmur-Export-Root", _header(self.root))]
        if if_none_match and parse_etags(if_none_match).contains_weak(f"sha256:{sha}"):
            body.close()
            return "304 Not Modified", headers, b""
        return "200 OK", [("Content-Type", "application/octet-stream"),
                          ("Content-Length", str(body.size)), *headers], body

    def _open_file(self, dir_fd: int, name: str) -> int:
        """Open the regular file ``name`` with O_NOFOLLOW; one over max_bytes is never opened."""
        st = _lstat(name, dir_fd)
        if st is None:
            raise refuse("not_found")
        if stat.S_ISLNK(st.st_mode):
            raise refuse("symlink_refused")
        if not stat.S_ISREG(st.st_mode):
            raise refuse("not_a_regular_file")
        if st.st_size > self.max_bytes:
            raise refuse("too_large")
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
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise refuse("not_a_regular_file")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _digest(self, body: FileBody) -> str:
        """The sha256 of ``body``'s file as it stands; it is served only if it stays so."""
        for _ in range(READ_ATTEMPTS):
            try:
                fst = os.fstat(body.fd)
                if fst.st_size > self.max_bytes:
                    raise refuse("too_large")           # it grew past the limit
                sha, read = self.digests.digest(body.fd, fst, self.max_bytes)
                if sha is None:
                    raise refuse("too_large")
                body.key = file_key(fst)
                if read == fst.st_size and file_key(os.fstat(body.fd)) == body.key:
                    return sha
            except OSError as ex:
                logger.warning("operator plane: cannot read a file: %s", ex.strerror)
                raise refuse("io_error") from None
        logger.warning("operator plane: a file kept changing while it was hashed")
        raise refuse("io_error")


class FileChanged(OSError):
    """A file changed while it was sent: its response is cut, never finished with other bytes."""


class FileBody:
    """A WSGI body: an open regular file's bytes, in chunks, up to the size it was hashed at.

    Each chunk is read with ``pread`` and checked against the file's key (its
    ``fstat``): a file that changes while it is sent ends the response with
    ``FileChanged``, so a client never takes other bytes for the ETag it was sent.
    The server calls ``close()``, which closes the descriptor, sent or not.
    """

    def __init__(self, fd: int):
        self.fd = fd
        self.key: tuple = ()

    @property
    def size(self) -> int:
        return self.key[2]

    def __iter__(self):
        offset = 0
        while offset < self.size:
            chunk = os.pread(self.fd, min(SEND_CHUNK, self.size - offset), offset)
            if not chunk or file_key(os.fstat(self.fd)) != self.key:
                logger.warning("operator plane: a file changed while it was sent; "
                               "its response is cut")
                raise FileChanged(errno.ESTALE, "the file changed while it was sent")
            offset += len(chunk)
            yield chunk

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
