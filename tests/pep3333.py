"""A WSGI application checked against PEP 3333 from both sides, for the conformance tests.

``Checked`` puts ``wsgiref.validate.validator`` around an application (it raises on a
status, a header, an environ key, a ``wsgi.input`` call or an iterable the PEP forbids)
and, around that, the checks a server makes that the validator does not: no hop-by-hop
header (``Connection``: what wsgiref's own server refuses), header values in latin-1,
``start_response`` once (again only with ``exc_info``), no body past its Content-Length
nor, read to its end, short of it (the client would wait for the rest), and every body
closed.
Its ``Client`` is Werkzeug's test client; ``violations`` lists what went wrong.
"""
from __future__ import annotations

import io
from wsgiref.util import is_hop_by_hop
from wsgiref.validate import validator

from werkzeug.test import Client, EnvironBuilder, run_wsgi_app


# The ways a request's body comes to the application (LENGTH: the body's length).
BODY_WAYS = {"length": {"CONTENT_LENGTH": "LENGTH"},
             "length-in-spaces": {"CONTENT_LENGTH": " LENGTH "},
             "terminated": {"wsgi.input_terminated": True},
             "empty-length-terminated": {"CONTENT_LENGTH": "", "wsgi.input_terminated": True}}


def _latin1(text: str) -> bool:
    """Whether ``text`` is latin-1, as PEP 3333 asks of a header value."""
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


class _Counted:
    """The body as the server writes it: its bytes counted, its close recorded."""

    def __init__(self, body, answer: dict, checked: Checked):
        self._body = body
        self._answer = answer
        self._checked = checked
        self._written = 0
        self._ended = False

    def __iter__(self):
        for item in self._body:
            self._written += len(item)
            yield item
        self._ended = True

    def close(self) -> None:
        answer = self._answer
        declared = answer.get("length")
        if declared is not None and answer["method"] != "HEAD" and \
                self._written > int(declared):
            self._checked.violations.append(
                f"{answer['status']}: {self._written} bytes past Content-Length {declared}")
        if declared is not None and answer["method"] != "HEAD" and self._ended and \
                self._written < int(declared):
            self._checked.violations.append(
                f"{answer['status']}: {self._written} bytes short of Content-Length {declared}")
        self._checked.open_bodies -= 1
        self._body.close()


class Checked:
    """``app`` as a strict server would see it."""

    def __init__(self, app):
        self._app = validator(app)
        self.violations: list[str] = []
        self.open_bodies = 0
        self.client = Client(self)

    def __call__(self, environ, start_response):
        answer = {"method": environ["REQUEST_METHOD"], "calls": 0}

        def checked_start(status, headers, exc_info=None):
            if answer["calls"] and exc_info is None:
                self.violations.append(f"{status}: start_response again without exc_info")
            answer["calls"] += 1
            answer["status"] = status
            for name, value in headers:
                if is_hop_by_hop(name):
                    self.violations.append(f"{status}: hop-by-hop header {name}")
                if not value.isascii() and not _latin1(value):
                    self.violations.append(f"{status}: {name} is not latin-1: {value!r}")
                if name.lower() == "content-length":
                    answer["length"] = value
            return start_response(status, headers, exc_info)

        body = self._app(environ, checked_start)
        self.open_bodies += 1
        return _Counted(body, answer, self)

    def raw_post(self, path: str, data: bytes, headers: dict, way: str):
        """POST ``data`` as ``BODY_WAYS[way]`` says, read a few bytes at a time (``Dribble``):
        the status and the body, read whole and closed."""
        builder = EnvironBuilder(path=path, method="POST", headers=headers, data=data,
                                 content_type="application/json")
        try:
            env = builder.get_environ()
        finally:
            builder.close()
        env.pop("CONTENT_LENGTH", None)
        env["wsgi.input"] = Dribble(data)
        env.update({key: value.replace("LENGTH", str(len(data))) if isinstance(value, str)
                    else value for key, value in BODY_WAYS[way].items()})
        body, status, _ = run_wsgi_app(self, env, buffered=True)
        return status, b"".join(body)

    def assert_sound(self) -> None:
        assert self.violations == []
        assert self.open_bodies == 0, f"{self.open_bodies} bodies never closed"


class Dribble(io.RawIOBase):
    """An input whose ``read(n)`` gives at most ``step`` bytes a call, as a server's may."""

    def __init__(self, data: bytes, step: int = 3):
        self._data = io.BytesIO(data)
        self._step = step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        chunk = self._data.read(min(len(buffer), self._step))
        buffer[:len(chunk)] = chunk
        return len(chunk)
