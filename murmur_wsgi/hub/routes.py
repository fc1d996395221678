"""The hub's request path: the numbered steps of the Nexus A2A server text, and rendering.

HTTP tier (steps 1-4, never reads the body before step 4): a route of the
text (``public_url`` set) → a credential → a published agent of the
credential's tenant → the card, or the body (at most
``limits.max_body_bytes``, else 413). RPC tier (steps 5-10): JSON → envelope
→ ``A2A-Version: 1.0`` exactly → method → params (an object, its ids at most
``limits.max_id_bytes``) → handler. Every ``/a2a/v1``
answer carries ``Cache-Control: private, no-store`` and ``Vary``.

Every refusal is an error of the one hierarchy (``errors.py``) carrying its
own answer: a ``HubRefusal`` its status and body, an ``RpcError`` (the
store's ``StoreError`` included) its JSON-RPC error. Only here is
``Exception`` caught: logged, answered -32603, never a traceback.
"""
from __future__ import annotations

import logging

from murmur_wsgi import logs
from murmur_wsgi.errors import (BodyTooLargeError, BodyUnreadableError,
                                ExtendedAgentCardNotConfiguredError,
                                InternalError, InvalidParamsError, MethodNotFoundError,
                                Refusal, RpcError, UnsupportedOperationError,
                                VersionNotSupportedError)
from murmur_wsgi.hub.cards import CARD_SUFFIX, PREFIX
from murmur_wsgi.hub.errors import A2A_HEADERS, AgentNotFound, HubRefusal, NotServed
from murmur_wsgi.hub.sse import HubStream
from murmur_wsgi.keyed_turns import STEP_KEY
from murmur_wsgi.serving import body as bodies
from murmur_wsgi.serving.answers import JSON_HEADERS, refusal_response, rpc_error, status_line
from murmur_wsgi.serving.envelope import ABSENT, check_envelope, parse_json
from murmur_wsgi.serving.ows import OWS
from murmur_wsgi.serving.writes import (SOCKET_KEY, Body, Timed, encoded, headers_only,
                                        utf8_length)
from murmur_wsgi.streams.sse import PENDING_BYTES
from murmur_wsgi.wire import rpc as wire_rpc
from murmur_wsgi.wire.encode import compact_utf8
from murmur_wsgi.wire.id_limits import check_id_bytes, check_request_id
from murmur_wsgi.wire.methods import PUSH_METHODS
from murmur_wsgi.wire.raw import RawJSON, RawJSONPieces

logger = logging.getLogger(__name__)

SSE = [("Content-Type", "text/event-stream"), ("X-Accel-Buffering", "no")]
GROUP = "/a2a/v1"
_IN_GROUP = GROUP + "/"
_AFTER_PREFIX = len(PREFIX)
SMALL_ANSWER = 64 * 1024        # an answer this small fits a socket's send buffer whole
OK = status_line(200)


class Call:
    """One JSON-RPC request on the hub: who, which agent, the method and its params."""

    __slots__ = ("id", "method", "params", "tenant", "subject", "agent", "environ")

    def __init__(self, request_id, method, tenant, subject, agent, environ):
        self.id = request_id
        self.method = method
        self.params: dict = {}
        self.tenant = tenant
        self.subject = subject
        self.agent = agent
        self.environ = environ


def handle(hub, environ, start_response):
    """The WSGI entry: one answer per request, every one of them written under
    ``stream.write_timeout_secs`` (a stream's by ``_stream``): a client that never reads a
    large answer (a ListTasks page of large tasks) is cut, not held with it for good.

    The hub has no log bound of its own: what it logs is cut to the process's, not to the
    bound of a door answering on this thread before it (``logs.APP_BOUND``)."""
    bound = logs.APP_BOUND.set(None)
    try:
        body = _answer(hub, environ, start_response)
    finally:
        logs.APP_BOUND.reset(bound)
    sock = environ.get(SOCKET_KEY)
    if environ.get("REQUEST_METHOD") == "HEAD":
        return headers_only(body, sock, hub.config.stream["write_timeout_secs"])
    if isinstance(body, Body):
        return body
    if isinstance(body, list) and len(body) == 1 and len(body[0]) <= SMALL_ANSWER:
        # PERF: written whole, at once: no pieces, but the deadline all the same (Timed)
        return body if sock is None else \
            Timed(body, sock, hub.config.stream["write_timeout_secs"])
    return Body(body, None, sock=sock, timeout=hub.config.stream["write_timeout_secs"],
                budget=PENDING_BYTES)


def _answer(hub, environ, start_response):
    """The request's answer, by the numbered steps.

    PERF: what the steps have learnt so far (for the answer and the log of a failure)
    is in locals, and steps 3 and 7-9 pass inline when the request is right (the
    functions below raise what is wrong): a call of a Python function costs a worker
    about 700 instructions, more than most checks (docs/performance.md)."""
    tenant = agent = request_id = None
    try:
        kind, agent = route(hub, environ)                                     # step 1
        if kind == "metrics":
            return _metrics_page(hub, environ, start_response)
        tenant, subject = hub.credentials.tenant_of(environ)                  # step 2
        STEP_KEY.set(tenant)            # its long steps take turns (murmur_wsgi/turns.py)
        if (tenant, agent) not in hub.cards:                                  # step 3
            # NOTE: unknown, unpublished and another tenant's agents answer alike.
            raise AgentNotFound()
        if kind == "card":
            return _json(start_response, 200, hub.cards[(tenant, agent)])    # step 4
        limits = hub.config.tenant_limits(tenant)
        raw = read_body(environ, limits["max_body_bytes"])                    # step 4
        payload = parse_json(raw, limits["max_json_depth"], limits["max_json_values"],
                             doubles=True)                                    # step 5
        request_id, method, raw_params = check_envelope(payload)              # step 6
        # PERF: an id of at most a quarter of the cap in characters cannot pass it.
        if type(request_id) is str and len(request_id) * 4 > limits["max_id_bytes"]:
            check_request_id(request_id, limits["max_id_bytes"])              # step 6
        call = Call(request_id, method, tenant, subject, agent, environ)
        if hub.metrics is not None:
            hub.metrics.request(method)
        version = environ.get("HTTP_A2A_VERSION")                             # step 7
        if version is None or version.strip(OWS) != "1.0":
            check_version(environ)
        handler = hub.methods.get(method) or lookup(hub, method)             # step 8
        if type(raw_params) is dict:                                          # step 9
            call.params = raw_params
        else:
            call.params = check_params(raw_params)
        if len(raw) > limits["max_id_bytes"]:   # PERF: no id is longer than the body's text
            check_id_bytes(method, call.params, limits["max_id_bytes"])        # step 9
        result = handler(hub, call)                                           # step 10
    except Refusal as ex:
        status, headers, data = refusal_response(ex, compact_utf8)
        start_response(status, headers)
        return [data]
    except RpcError as ex:
        data = rpc_error(getattr(ex, "request_id", request_id), ex, compact_utf8)
        return _json(start_response, ex.http_status, data)
    except Exception:  # noqa: BLE001 - the one place every failure is caught
        logger.exception("a request to %s/%s failed inside the hub", tenant, agent)
        return _json(start_response, 200, rpc_error(request_id, InternalError(
            "Internal error: the hub could not answer this request"), compact_utf8))
    if isinstance(result, HubStream):
        return _stream(start_response, environ, result)
    if isinstance(result, RawJSONPieces):
        done = getattr(result, "done", None)      # a held answer's (hub/held.py)
        try:
            pieces = _pieces(start_response, (wire_rpc.head(request_id, compact_utf8)
                                              + ',"result":', *result, "}"))
        except BaseException:
            if done is not None:
                done()
            raise
        if done is None:
            return pieces
        return Body(pieces, done, sock=environ.get(SOCKET_KEY),
                    timeout=hub.config.stream["write_timeout_secs"], budget=PENDING_BYTES)
    text = result if isinstance(result, RawJSON) else compact_utf8(result)
    return _json(start_response, 200, wire_rpc.result(request_id, text, compact_utf8).encode())


def route(hub, environ: dict) -> tuple[str, str | None]:
    """Step 1: ``("metrics" | "card" | "rpc", agent name)``, or 404.

    An RPC path may end with one ``/`` (a client joining the card's URL with
    ``/``, as httpx's ``base_url`` does); the card's URL itself has none. A path the
    client percent-encoded (``/a2a%2Fv1%2Fagents%2Fecho``, ``%65cho``) is none of them:
    no route needs a ``%`` (agent names are letters, digits, ``.``, ``_`` and ``-``), and
    a proxy in front that allows or denies by the path as sent would see another one
    than the hub, which reads it decoded (``PATH_INFO``). The path as sent is gunicorn's
    ``RAW_URI``, uWSGI's and mod_wsgi's ``REQUEST_URI`` (Werkzeug gives both); a server
    that gives neither (wsgiref's, Django's runserver) is read by ``PATH_INFO`` alone.
    """
    path = environ.get("PATH_INFO", "")
    sent = environ.get("RAW_URI") or environ.get("REQUEST_URI") or ""
    if "%" in sent.partition("?")[0]:
        raise NotServed(a2a=path == GROUP or path.startswith(_IN_GROUP))
    if path.startswith(PREFIX) and hub.config.public_url:   # PERF: an agent's, the most
        rest = path[_AFTER_PREFIX:]
    else:
        if path == "/metrics" and hub.metrics is not None and \
                environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            return "metrics", None
        in_group = path == GROUP or path.startswith(_IN_GROUP)
        if not in_group or not hub.config.public_url:
            raise NotServed(a2a=in_group)
        rest = ""
    verb = environ.get("REQUEST_METHOD", "GET")
    if verb == "POST":
        kind, name = "rpc", rest[:-1] if rest.endswith("/") else rest
    elif rest.endswith(CARD_SUFFIX) and verb in ("GET", "HEAD"):
        kind, name = "card", rest[:-len(CARD_SUFFIX)]
    else:
        raise NotServed()
    if not name or "/" in name:
        raise NotServed()
    return kind, name


def read_body(environ: dict, limit: int) -> bytes:
    """Step 4: the body, at most the tenant's ``limits.max_body_bytes`` (else 413), and at
    most the limit of a host the hub is mounted in (413 too, naming that limit where the
    host's input says it, never the hub's); a body that cannot be read (broken chunks,
    ended early, or a Transfer-Encoding not ending in chunked) is 400."""
    try:
        raw = bodies.read_body(environ, limit)
    except bodies.BodyUnreadable as ex:
        raise BodyUnreadableError(f"the request body cannot be read: {ex}") from None
    except bodies.PastHostsLimit as ex:
        raise BodyTooLargeError("the JSON-RPC body is larger than its host's limit"
                                if ex.limit is None else
                                f"the JSON-RPC body is larger than {ex.limit} bytes, its "
                                "host's limit") from None
    if raw is None:
        raise BodyTooLargeError(f"the JSON-RPC body is larger than {limit} bytes")
    return raw


def check_version(environ: dict) -> None:
    """Step 7: ``A2A-Version`` must be exactly ``1.0``: any other value, or none, is -32009
    (``_answer`` passes ``1.0`` inline)."""
    raw = environ.get("HTTP_A2A_VERSION")
    if raw is None or raw.strip(OWS) != "1.0":
        raise VersionNotSupportedError("" if raw is None else raw.strip(OWS))


def lookup(hub, method: str):
    """Step 8: the method's handler, or the error the text gives an unserved one
    (``_answer`` finds a served one inline)."""
    handler = hub.methods.get(method)
    if handler is not None:
        return handler
    if method in PUSH_METHODS:
        raise UnsupportedOperationError("push notifications are not enabled on this hub")
    if method == "GetExtendedAgentCard":
        raise ExtendedAgentCardNotConfiguredError()
    raise MethodNotFoundError()


def check_params(raw_params) -> dict:
    """Step 9: params is an object (absent or null read as ``{}``), else -32602
    (``_answer`` passes an object inline)."""
    if raw_params is ABSENT or raw_params is None:
        return {}
    if isinstance(raw_params, dict):
        return raw_params
    raise InvalidParamsError("Invalid params: params must be an object")


def _json(start_response, status: int, data: bytes):
    start_response(OK if status == 200 else status_line(status),
                   [JSON_HEADERS, ("Content-Length", str(len(data))), *A2A_HEADERS])
    return [data]


def _pieces(start_response, texts: tuple):
    """A ``RawJSONPieces`` result's answer, encoded ``PENDING_BYTES`` characters at a time
    as the client takes it (``writes.encoded``): the answer quotes the result's texts (a
    memory store's kept wire form of a task: shared), never a copy of its own."""
    start_response(OK, [JSON_HEADERS, ("Content-Length", str(utf8_length(texts))),
                        *A2A_HEADERS])
    return encoded(texts, PENDING_BYTES)


def _stream(start_response, environ: dict, stream: HubStream):
    """A stream's answer: its headers, then its body under the write deadline."""
    try:
        start_response("200 OK", [*SSE, *A2A_HEADERS])
    except BaseException:
        stream.close()
        raise
    return Body(stream, None, sock=environ.get(SOCKET_KEY), timeout=stream.write_timeout,
                budget=PENDING_BYTES)


def _metrics_page(hub, environ, start_response):
    """``GET /metrics``: every worker's counts; an operator's JWT only (it counts every tenant)."""
    if not hub.credentials.is_operator(environ):
        raise HubRefusal(a2a=False)
    data = hub.metrics.render()
    start_response("200 OK", [("Content-Type", hub.metrics.content_type),
                              ("Content-Length", str(len(data))),
                              ("Cache-Control", "no-store")])
    return [data]
