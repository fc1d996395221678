"""Reading a request's body, bounded: never a byte past the limit, never a blocking read.

A body whose Content-Length passes the limit is refused before a byte is read;
one without a Content-Length, or with a Transfer-Encoding, which overrides it
(chunked), is read only where the server says the input ends
(``wsgi.input_terminated``, as gunicorn and Werkzeug's server set it for a
chunked body), and refused as soon as the read passes the limit. A
Content-Length that is not a number reads as no body. Each application
answers a refusal its own way (both 413 with -32600 and id null).

A chunked body whose framing is broken (a chunk size that is not hex, a chunk
without its CRLF) or that ends before its last chunk cannot be read: the
server's parser raises its own error (gunicorn's ``ParseException``, or its
``NoMoreData``), which ``read_body`` raises as ``BodyUnreadable``, the client's
fault and not the application's. So does a body that ends before its
Content-Length's bytes came (the client closed or reset its end, the worker
cut it at the body deadline, or an input a host wraps raised its own error):
the request is incomplete (RFC 9112, section 8), and the servers hand the bytes
that came as if they were all of it. (An input's error is the body's, whatever
its type, but the process's own: memory or the stack ran out, or the read's code
has a bug (``TypeError``, ``AttributeError``, ``NameError``: a host's wrapper),
which goes up as the application's failure; and a host's refusal of its size, an
HTTP error of code 413 as Flask's stream raises past ``MAX_CONTENT_LENGTH``, which
``read_body`` raises as ``PastHostsLimit``, naming the host's limit where its input
says it; a chunked body that ended right at that limit is whole.) So, before a byte
is read, does a body whose Transfer-Encoding does not end in chunked (``gzip``,
``chunked, gzip``): its length cannot be told, and the server must answer 400 and
close (RFC 9112, section 6.3). gunicorn refuses it before the application;
Werkzeug's server passes it (a Content-Length with it read as no body).
"""
from __future__ import annotations

import io
import logging
import re

from werkzeug.wsgi import LimitedStream

from murmur_wsgi.serving.ows import OWS

logger = logging.getLogger(__name__)


_DIGITS = re.compile(r"[0-9]+\Z")
_RAW_PIECE = 64 * 1024          # a raw input (Werkzeug's server's chunked one) read at most this

# What a read of the input may raise that is the server's and not the client's body's: the
# process ran out of memory or stack (a wrapper's read of a large body, say), or the
# read's code has a bug (a host's wrapper of the input calling what it has not).
_SERVER_FAILURES = (MemoryError, RecursionError, TypeError, AttributeError, NameError)


class BodyUnreadable(ValueError):
    """The request's body cannot be read: its chunked framing is broken, or it ended early."""


class PastHostsLimit(Exception):
    """The request's body is past the limit of the host the application is mounted in (its
    input raised an HTTP error of code 413: Werkzeug's ``RequestEntityTooLarge``, as Flask's
    stream does past ``MAX_CONTENT_LENGTH``). ``limit`` is that limit in bytes where the
    input says it (Werkzeug's ``LimitedStream`` read to its end), else None: the host's
    error names no number, and the body's own size is not its host's limit."""

    def __init__(self, limit: int | None):
        super().__init__(limit)
        self.limit = limit


def _final_coding(codings: str) -> str:
    """The last of a Transfer-Encoding's codings, lowercased (the server joins repeated
    headers with commas; empty list items do not count, RFC 9110, section 5.6.1)."""
    names = [name.strip(OWS).lower() for name in codings.split(",")]
    return next((name for name in reversed(names) if name), "")


def _read(stream, size: int, pieces: list) -> bytes:
    """At most ``size`` bytes of ``stream``: read until they came or a read is empty, as a
    server's read (or a host's wrapper of it) may give fewer bytes than asked. ``pieces``
    holds what came before and comes (what is left when a read raises).

    PERF: the pieces are joined once (one piece, the usual, is not copied): a body added
    up read by read was copied whole at each read, 2 MiB in reads of 256 bytes in 0.5 to
    0.9 s of CPU."""
    came = sum(map(len, pieces))
    read = _raw_reader(stream, size - came) if isinstance(stream, io.RawIOBase) \
        else stream.read
    while came < size:
        more = read(size - came)
        if not more:
            break
        pieces.append(more)
        came += len(more)
    return b"".join(pieces)


def _raw_reader(stream, size: int):
    """``read(n)`` of a raw input (``io.RawIOBase``: Werkzeug's server's chunked input,
    ``DechunkedInput``, or its ``LimitedStream`` around it) of at most ``size`` bytes in
    all, into a view of one buffer.

    Its own ``read`` hands ``readinto`` a bytearray, which ``DechunkedInput`` shrinks when
    a chunk comes shorter than its size, then copies the count it said from the shrunk
    buffer (CPython's ``RawIOBase.read``): the client's bytes and memory from past them,
    or, for a chunk size past a limit of 1 MiB, the process killed by SIGSEGV. A view
    does not shrink: the short chunk raises ``ValueError``, a body that cannot be read."""
    view = memoryview(bytearray(min(size, _RAW_PIECE)))

    def read(wanted: int) -> bytes:
        came = stream.readinto(view[:wanted]) or 0
        return bytes(view[:came])
    return read


def read_body(environ: dict, max_bytes: int) -> bytes | None:
    """The request's body (``b""`` without one), or None when it is larger than ``max_bytes``;
    ``PastHostsLimit`` when it is past its host's own limit."""
    stream = environ["wsgi.input"]
    codings = environ.get("HTTP_TRANSFER_ENCODING")
    if codings and _final_coding(codings) != "chunked":
        logger.info("refused a request body whose Transfer-Encoding does not end in chunked: "
                    "%.100r", codings)
        raise BodyUnreadable("its Transfer-Encoding does not end in chunked "
                             "(RFC 9112, section 6.3)")
    # NOTE: with both, Transfer-Encoding decides (RFC 9112, section 6.3). gunicorn refuses
    # such a request; Werkzeug's server passes both, the input dechunked.
    length = None if codings else environ.get("CONTENT_LENGTH")
    if length:
        # NOTE: int() would also read a no-break space or NEL around the digits, a sign, an
        # underscore and any script's digits ("7\xa0", "+7", "0_7", "\u0667" as 7).
        length = length.strip(OWS)
        try:
            size = int(length) if _DIGITS.match(length) else -1
        except ValueError:              # past int()'s digits (sys.set_int_max_str_digits)
            return b""
        if size < 0:
            return b""
        if size > max_bytes:
            logger.info("refused a request body declaring %d bytes; limits.max_body_bytes is %d",
                        size, max_bytes)
            return None
        if size == 0:
            return b""
        pieces: list = []
        try:
            body = stream.read(size)
            if 0 < len(body) < size:    # PERF: the usual one read calls nothing more
                pieces.append(body)
                body = _read(stream, size, pieces)
        except _SERVER_FAILURES:
            raise
        # The client reset its connection or timed out (OSError), or an input a host wraps
        # said the body ended early its own way (Werkzeug's LimitedStream, Flask's
        # request.stream: ClientDisconnected).
        except Exception as ex:  # noqa: BLE001 - the input's failure is the client's body's
            came = sum(map(len, pieces))
            refusal = _hosts_refusal(ex, stream, came)
            if refusal is not None:
                raise refusal from ex
            logger.info("refused a request body whose connection failed after %d of its %d "
                        "bytes: %s", came, size, _said(ex))
            raise BodyUnreadable(f"the body ended after {came} of {size} bytes: "
                                 f"{_said(ex)}") from ex
        if len(body) < size:
            logger.info("refused a request body that ended after %d of its %d bytes",
                        len(body), size)
            raise BodyUnreadable(f"the body ended after {len(body)} of {size} bytes")
        return body
    if not environ.get("wsgi.input_terminated"):
        return b""
    pieces: list = []
    try:
        body = _read(stream, max_bytes + 1, pieces)     # one byte past the limit: it is passed
    except _SERVER_FAILURES:
        raise
    except Exception as ex:  # noqa: BLE001 - the server's parser's own errors (gunicorn's)
        if not (getattr(ex, "code", None) == 413 and _ends_at_hosts_limit(stream)):
            refusal = _hosts_refusal(ex, stream, None)
            if refusal is not None:
                raise refusal from ex
            logger.info("refused a chunked request body that cannot be read: %s", _said(ex))
            raise BodyUnreadable(_said(ex)) from ex
        body = b"".join(pieces)             # whole, ended at its host's limit: still ours
    if len(body) > max_bytes:
        logger.info("refused a request body of more than %d bytes (no Content-Length); "
                    "limits.max_body_bytes is %d", max_bytes, max_bytes)
        return None
    return body


def _hosts_refusal(ex: Exception, stream, came: int | None) -> PastHostsLimit | None:
    """An input's failure as its host's own refusal of a body too large (an HTTP error of
    code 413), naming the host's limit where its input says it; None for any other
    failure. The body is refused as one past ``limits.max_body_bytes`` is, not as one that
    cannot be read; logged as such."""
    if getattr(ex, "code", None) != 413:
        return None
    refusing = _refusing(stream)
    limit = None if refusing is None else refusing.limit
    logger.info("refused a request body past its host's limit%s%s: %s",
                "" if limit is None else f" of {limit} bytes",
                "" if came is None else f" after {came} bytes", _said(ex))
    return PastHostsLimit(limit)


def _ends_at_hosts_limit(stream) -> bool:
    """Whether a chunked body whose host refused a read past its limit ended right at it.

    Werkzeug's ``LimitedStream`` bounding a body by a maximum cannot tell a body that ended
    at its limit from one with more to come: a read at the limit raises
    ``RequestEntityTooLarge`` either way. The server's input under it can, read for one
    byte: it is terminated (``wsgi.input_terminated``, which a terminated body's read
    needs here, and under which alone Werkzeug bounds one by a maximum), so an empty read
    is the body's end (a chunked body's last chunk), and a body that ended early or whose
    framing broke fails as it would have before the limit. A byte that comes is one past
    the limit: the refusal stands. Any other input (or one wrapping Werkzeug's) is not
    read past its refusal. A ``LimitedStream`` under the one that refused, at its own limit
    too, is looked through the same way: read, it would refuse as well."""
    raw = _refusing(stream)
    while isinstance(raw, LimitedStream) and raw.is_exhausted:
        raw = getattr(raw, "_stream", None)
    if raw is None:
        return False
    try:
        more = _read(raw, 1, [])
    except _SERVER_FAILURES:
        raise
    except Exception as ex:  # noqa: BLE001 - the server's parser's own errors (gunicorn's)
        logger.info("refused a chunked request body that cannot be read at its host's "
                    "limit: %s", _said(ex))
        raise BodyUnreadable(_said(ex)) from ex
    return not more


def _refusing(stream) -> LimitedStream | None:
    """The Werkzeug ``LimitedStream`` at its limit, which refuses a read: ``stream``, or one
    it wraps (a host's stream handed on as another's input and bounded again, Flask's
    stream of a view under another's); None for any other input.

    NOTE: ``_stream`` is the input a LimitedStream wraps (Werkzeug 2.3 and later); without
    it no stream under it is known."""
    while isinstance(stream, LimitedStream):
        if stream.is_exhausted:
            return stream
        stream = getattr(stream, "_stream", None)
    return None


def _said(ex: Exception) -> str:
    """What an input's failure says: its text, or its class's name when it has none."""
    return str(ex) or type(ex).__name__
