"""Work that would hold gevent's loop, run where it cannot: ``off_loop``.

Under ``gunicorn -k gevent`` a long call of one request (a large file's digest, a large
body's parse) holds the loop, and with it every other request of the worker, until it
returns. ``off_loop`` runs it in a native thread of gevent's threadpool while the
request's greenlet waits. That thread still needs the GIL, which it gives up at the
interpreter's switch interval (5 ms) whenever it runs Python code (a parse's number
hooks) or waits (a read): the loop runs between. Without a patched ``threading``
(Werkzeug's threaded server, an embedding) the request has its own thread and the work
runs inline. gevent is found in ``sys.modules``, never imported here.

Concurrency: the work must take no lock of the patched ``threading`` (a gevent lock is not
for a native thread); its result and its exception are handed back to the caller.
"""
from __future__ import annotations

import sys
from typing import Callable, TypeVar

T = TypeVar("T")


def off_loop(work: Callable[..., T], *args) -> T:
    """Run ``work(*args)`` where it cannot hold gevent's loop, and return its result, or
    raise what it raised."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        loop = sys.modules["gevent"].get_hub()
        done, value = loop.threadpool.apply(_caught, (work, args))
        if not done:
            raise value
        return value
    return work(*args)


def _caught(work: Callable[..., T], args: tuple) -> tuple[bool, object]:
    """``(True, work(*args))``, or ``(False, the exception it raised)``.

    NOTE: an exception that leaves a threadpool's work is also printed by gevent's hub,
    a traceback on stderr outside the worker's log (a body's -32700, which any client
    can send, was eleven lines of it): it is handed back as a value instead."""
    try:
        return True, work(*args)
    except Exception as ex:  # noqa: BLE001 - raised again by the caller, in its greenlet
        return False, ex
