"""The HTTP under ``A2AClient``: one request, its answer read within limits, JSON-RPC out.

An answer's status line and headers arrive whole within the read timeout of the
request (``client/deadline.py``, on the client's own session); its body is read as it
arrives (``client/body.py``), at most ``max_answer_bytes``, whole within the read
timeout counted from its headers, and parsed only when it holds at most
``max_answer_values`` JSON values. A
redirect is followed only within the origin of the URL it answered (a redirect
elsewhere is an ``HttpRefusal`` and nothing is sent there), and its own body is
never read. Every failure of ``requests`` is raised as one of the client's errors, and
an answer that is not ``application/json``, an answer of another request, or a result of
another shape than its method's (an object, a task), as a ``ProtocolError``.
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
import time
from urllib.parse import urljoin

import requests

from murmur_wsgi.client.body import BodyTooLarge, BodyTooSlow, TooManyValues, loads, read_body
from murmur_wsgi.client.card import same_origin
from murmur_wsgi.client.deadline import within
from murmur_wsgi.client.errors import (ConnectionFailed, ConnectTimeout, DoorError,
                                       HttpRefusal, ProtocolError, ReadTimeout, RpcError,
                                       kind_of)

logger = logging.getLogger(__name__)

_NO_ID = object()               # an answer without an "id" member

# What ``requests`` raises, as the client's error and its text (the first that matches).
FAILURES = ((requests.ConnectTimeout, ConnectTimeout, "cannot reach {where}: connect timed out"),
            (requests.ReadTimeout, ReadTimeout, "{where} did not answer within the timeout"),
            (requests.ConnectionError, ConnectionFailed, "cannot reach {where}: {reason}"),
            (requests.RequestException, DoorError, "the request to {where} failed: {reason}"))


# A header value requests sends: empty, or no leading whitespace and no line break.
_SENDABLE = re.compile(r"\S[^\r\n]*")


def unsendable(headers: dict) -> list[str]:
    """The names of ``headers`` whose value requests refuses to send."""
    return [name for name, value in headers.items()
            if isinstance(value, str) and value and not _SENDABLE.fullmatch(value)]


def media_type(response) -> str:
    """The media type of ``response``'s Content-Type, lowercased (media types are
    case-insensitive, RFC 9110, section 8.3.1; parameters dropped): "" without one."""
    content_type = response.headers.get("Content-Type") or ""
    return content_type.partition(";")[0].strip(" \t").lower()


def other_request(body: dict, request_id: int) -> str | None:
    """None when JSON-RPC response ``body`` answers request ``request_id`` (its id is that
    number, or null on an error: JSON-RPC 2.0's answer to a request whose id the server
    could not read); else the id it names instead (``id 2``, ``no id``)."""
    answered = body.get("id", _NO_ID)
    # NOTE: the id's type too: True == 1 and 1.0 == 1 in Python, never in JSON-RPC.
    if (type(answered) is int and answered == request_id) \
            or ("error" in body and answered is None):
        return None
    return "no id" if answered is _NO_ID else f"id {json.dumps(answered)[:40]}"


def is_error_object(error) -> bool:
    """Whether ``error`` is a JSON-RPC 2.0 error object: an integer ``code`` (not a boolean)
    and a text ``message``."""
    return isinstance(error, dict) and type(error.get("code")) is int \
        and isinstance(error.get("message"), str)


# OpenSSL's reason in its text: "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)".
_TLS_REASON = re.compile(r"\[SSL(?:: \w+)?\] (.+?)(?: \(_ssl\.c:\d+\))?['\")]")
# urllib3's wrapping of a failure: its pool, host, port and path, then what caused it.
_CAUSED_BY = re.compile(r"Max retries exceeded with url: .*?\(Caused by \w+\((['\"])(.*?)\1"
                        r"(?:,|\)\)$)", re.DOTALL)
# The connection urllib3 names before its failure's text (urllib3 2, and 1).
_CONNECTION = re.compile(r"(?:\w+\(host=[^)]*\)|<[\w.]+ object at 0x[0-9a-f]+>): ")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\"\n]+)")
_REASON_CHARS = 2000       # what is searched of a failure's text (a server's bytes may be in it)


def _reason(ex: Exception) -> str:
    """A short reason for a connection failure (no traceback, no URL repeated: never
    urllib3's pool, host, port and path, which the line names already)."""
    text = str(ex)[:_REASON_CHARS]
    if isinstance(ex, requests.exceptions.SSLError):
        found = _TLS_REASON.search(text)
        return f"TLS failed: {found.group(1) if found else 'the handshake was refused'}"
    for needle, reason in (("Connection refused", "connection refused"),
                           ("Name or service not known", "unknown host"),
                           ("nodename nor servname", "unknown host"),
                           ("Temporary failure in name resolution", "unknown host"),
                           ("timed out", "timed out"),
                           ("Connection reset", "connection reset"),
                           ("RemoteDisconnected", "the door closed the connection"),
                           ("No route to host", "no route to host"),
                           ("Connection broken", "the connection broke during the answer")):
        if needle in text:
            return reason
    found = _ERRNO.search(text)
    if found:
        said = found.group(1).rstrip(").")
        return (said[:1].lower() + said[1:])[:200]
    caused = _CAUSED_BY.search(text)
    if caused:
        text = caused.group(2)
    text = _CONNECTION.sub("", text)
    return text.splitlines()[0][:200] if text else type(ex).__name__


class JsonRpcHttp:
    """``A2AClient``'s requests: ``self.session``, ``timeout``, ``max_answer_bytes``,
    ``max_answer_values``, ``url`` and ``noun`` are the client's."""

    def _connect_timeout(self) -> float:
        return self.timeout[0] if isinstance(self.timeout, tuple) else self.timeout

    def _read_timeout(self) -> float | None:
        return self.timeout[1] if isinstance(self.timeout, tuple) else self.timeout

    def _stay_home(self, response, *args, deadline: float | None = None, **kwargs):
        """A response hook: refuse a redirect off the origin, before ``requests`` follows it,
        and one that comes past ``deadline`` (each hop's headers are within the read
        timeout, but 30 of them held one call for 30 timeouts): a ``ReadTimeout``.

        A redirect's own body is never read (closed unread, however long it says it is).
        Its target is read as ``requests`` reads it (the header's bytes as UTF-8); one
        that cannot be read (not UTF-8, an unclosed ``[``) is refused too.
        """
        if not response.is_redirect:
            return response
        response.close()
        if deadline is not None and time.monotonic() > deadline:
            raise ReadTimeout(f"{self.noun} at {self.url} did not answer within the timeout "
                              "(redirected past it)", response=response, url=self.url)
        location = response.headers["location"]
        try:
            target = urljoin(response.url, location.encode("latin-1").decode("utf-8"))
        except ValueError:
            raise HttpRefusal(response.status_code, "redirect",
                              f"redirected to {location[:200]!r}, which is not a URL: not "
                              "followed", response=response, url=self.url) from None
        if same_origin(target, response.url):
            return response
        raise HttpRefusal(response.status_code, "redirect",
                          f"redirected to {target[:200]}, another origin: not followed, "
                          "so the credential stays with the agent's", response=response,
                          url=self.url)

    def _request(self, method: str, url: str, *, timeout, stream: bool = False, **kwargs):
        """``(response, body)``: the body read (at most ``max_answer_bytes``, all of it
        within the read timeout), or None with ``stream``, the response left open.
        Redirects are followed within the read timeout (``deadline.headers_within``'s
        bound, when shorter: a stream's opening), counted from now."""
        read_timeout = timeout[1] if isinstance(timeout, tuple) else timeout
        opening = within(read_timeout)          # a stream's: its ordinary call's timeout
        deadline = None if opening is None else time.monotonic() + opening
        hook = functools.partial(self._stay_home, deadline=deadline)
        with self._failures():
            response = self.session.request(method, url, timeout=timeout, stream=True,
                                            hooks={"response": hook}, **kwargs)
        if stream:
            return response, None
        return response, self._read(response, read_timeout)

    def _read(self, response, read_timeout: float | None) -> bytes:
        """The whole body of ``response``, within ``read_timeout`` of now; it is closed."""
        deadline = None if read_timeout is None else time.monotonic() + read_timeout
        try:
            with self._failures(response):
                return read_body(response, self.max_answer_bytes, deadline)
        finally:
            response.close()

    @contextlib.contextmanager
    def _failures(self, response=None):
        """Raise what ``requests`` (or the body's limits) raise as the client's errors."""
        try:
            yield
        except BodyTooLarge as ex:
            raise ProtocolError(f"{self.noun} at {self.url} answered {ex} "
                                "(max_answer_bytes)", response=response, url=self.url) from ex
        except BodyTooSlow as ex:
            raise ReadTimeout(f"{self.noun} at {self.url} did not finish its answer within "
                              "the timeout", response=response, url=self.url) from ex
        except requests.exceptions.InvalidHeader:
            # NOTE: requests' text quotes the value, and a header's value is a credential
            # more often than not (a token read from a file with its \r, a key with a space).
            names = ", ".join(unsendable(self.headers)) or "a header"
            raise DoorError(f"the request to {self.noun} at {self.url} was not sent: the "
                            f"value of {names} holds a line break or begins with a space "
                            "(the value is not shown)", url=self.url) from None
        except requests.RequestException as ex:
            klass, text = next((k, t) for r, k, t in FAILURES if isinstance(ex, r))
            raise klass(text.format(where=f"{self.noun} at {self.url}", reason=_reason(ex)),
                        request=ex.request, url=self.url) from ex

    def _loads(self, data: bytes, response):
        """``data`` parsed (``loads``); more than ``max_answer_values`` values is a
        ``ProtocolError`` naming the limit, any other ``ValueError`` is raised as it is."""
        try:
            return loads(data, self.max_answer_values)
        except TooManyValues as ex:
            raise ProtocolError(f"{self.noun} at {self.url} answered {ex} "
                                "(max_answer_values)", response=response, url=self.url) from ex

    def _refusal(self, response, data: bytes) -> HttpRefusal:
        try:
            body = loads(data, self.max_answer_values)
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            return HttpRefusal(response.status_code, body["error"], str(body.get("message", "")),
                               response=response, url=self.url)
        text = data[:800].decode("utf-8", errors="replace")
        return HttpRefusal(response.status_code, "http_error",
                           (text or response.reason or "")[:200],
                           response=response, url=self.url)

    def _object(self, method: str, result) -> dict:
        """``result``, which must be a JSON object (a task, a page): else a ProtocolError."""
        if not isinstance(result, dict):
            raise ProtocolError(f"{self.noun} at {self.url} answered {method} with "
                                f"{kind_of(result)}, not an object", url=self.url)
        return result

    def _message(self, method: str, result) -> dict:
        """``result``, a message: an object with ``parts``; else a ProtocolError, as a
        message without them says nothing (and reads as neither a task nor a message)."""
        message = self._object(method, result)
        if "parts" not in message:
            raise ProtocolError(f"{self.noun} at {self.url} answered {method} with a message "
                                "without parts", url=self.url)
        return message

    def _task(self, method: str, result) -> dict:
        """``result``, a task: an object whose ``id`` (when given) is a string and whose
        ``status`` is an object whose ``state`` is a string; else a ProtocolError, as a task
        whose state cannot be read (or that has none) says nothing of how it stands."""
        task, wrong = self._object(method, result), None
        status = task.get("status")
        if not isinstance(task.get("id", ""), str):
            wrong = "whose id is not a string"
        elif "status" not in task:
            wrong = "without a status"
        elif not isinstance(status, dict):
            wrong = "whose status is not an object"
        elif not isinstance(status.get("state"), str):
            wrong = "whose status.state is not a string"
        if wrong:
            raise ProtocolError(f"{self.noun} at {self.url} answered {method} with a task "
                                f"{wrong}", url=self.url)
        return task

    def _answer(self, response, data: bytes, request_id: int):
        """The result of a JSON-RPC answer to request ``request_id``, or the error it
        carries, raised. An answer naming another id is a ``ProtocolError`` (JSON-RPC 2.0:
        a response's id is its request's), but an error with ``"id": null``, a server's
        answer to a request whose id it could not read.

        A JSON-RPC answer is ``application/json`` (A2A, section 3.2; parameters allowed, the
        media type in any case): any other content type (a proxy's HTML error page), or
        none, is a ``ProtocolError`` naming the status and the content type, whatever the
        body holds."""
        if media_type(response) != "application/json":
            content_type = response.headers.get("Content-Type")
            said = "no Content-Type" if content_type is None \
                else f"Content-Type {content_type[:100]!r}"
            raise ProtocolError(f"{self.noun} at {self.url} answered HTTP "
                                f"{response.status_code} with {said}, not application/json: "
                                "not a JSON-RPC answer", response=response, url=self.url)
        if response.status_code != 200:
            raise self._refusal(response, data)
        try:
            body = self._loads(data, response)
        except ValueError as ex:
            raise ProtocolError(f"{self.noun} at {self.url} answered something that is not JSON",
                                response=response, url=self.url) from ex
        if not isinstance(body, dict) or ("result" not in body and "error" not in body):
            raise ProtocolError(f"{self.noun} at {self.url} answered something that is not a "
                                "JSON-RPC response", response=response, url=self.url)
        other = other_request(body, request_id)
        if other:
            raise ProtocolError(f"{self.noun} at {self.url} answered request {request_id} "
                                f"with {other}: an answer to another request",
                                response=response, url=self.url)
        if "error" in body and not is_error_object(body["error"]):
            raise ProtocolError(f"{self.noun} at {self.url} answered an error that is not a "
                                "JSON-RPC error object (an integer code and a text message)",
                                response=response, url=self.url)
        if "error" in body:
            raise RpcError.from_error(body["error"], response=response, url=self.url)
        return body["result"]
