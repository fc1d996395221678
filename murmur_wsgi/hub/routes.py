"""The hub's request path: routes, credentials, the agent, then JSON-RPC, in that order.

HTTP tier (never reads the body): ``public_url`` set → a route of the text
→ a credential → a published agent of the credential's tenant → the card,
or the body (at most ``limits.max_body_bytes``, else 413). RPC tier: JSON →
envelope → ``A2A-Version: 1.0`` exactly → method → params (an object, its ids at
most ``limits.max_id_bytes``) → handler. Every ``/a2a/v1`` answer carries
``Cache-Control: private, no-store`` and ``Vary``.
Only here is ``Exception`` caught: logged, answered -32603, never a traceback.
"""
from __future__ import annotations

import logging

from murmur_wsgi.errors import (ExtendedAgentCardNotConfiguredError, InternalError,
                                InvalidParamsError, InvalidRequestError, MethodNotFoundError,
                                RpcError, UnsupportedOperationError, VersionNotSupportedError)
from murmur_wsgi.hub.auth import HubRefusal
from murmur_wsgi.hub.cards import CARD_SUFFIX, PREFIX
from murmur_wsgi.hub.sse import HubStream
from murmur_wsgi.hub.store import StoreError
from murmur_wsgi.serving.envelope import ABSENT, check_envelope, parse_json
from murmur_wsgi.wire import rpc as wire_rpc
from murmur_wsgi.wire.encode import compact_utf8
from murmur_wsgi.wire.id_limits import check_id_bytes
from murmur_wsgi.wire.raw import RawJSON

logger = logging.getLogger(__name__)

A2A_HEADERS = [("Cache-Control", "private, no-store"),
               ("Vary", "Authorization, X-API-Key, X-Tenant-ID")]
JSON = ("Content-Type", "application/json")
SSE = [("Content-Type", "text/event-stream"), ("X-Accel-Buffering", "no")]
PUSH_METHODS = frozenset({"CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig",
                          "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"})
_REASONS = {200: "OK", 401: "Unauthorized", 404: "Not Found", 413: "Content Too Large"}


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


def _plain(start_response, status: int, body: dict, challenge: str | None = None,
           a2a: bool = True):
    data = compact_utf8(body).encode()
    headers = [JSON, ("Content-Length", str(len(data)))]
    if challenge:
        headers.append(("WWW-Authenticate", challenge))
    if a2a:
        headers.extend(A2A_HEADERS)
    start_response(f"{status} {_REASONS.get(status, 'Error')}", headers)
    return [data]


def _rpc(start_response, data: bytes, status: int = 200):
    start_response(f"{status} {_REASONS[status]}",
                   [JSON, ("Content-Length", str(len(data))), *A2A_HEADERS])
    return [data]


def rpc_error(request_id, error: RpcError) -> bytes:
    return wire_rpc.error(request_id, error.error_object(), compact_utf8).encode()


def _route(path: str, verb: str) -> tuple[str, str] | None:
    """``("card" | "rpc", agent name)`` of a route of the text, else None."""
    if not path.startswith(PREFIX):
        return None
    rest = path[len(PREFIX):]
    if rest.endswith(CARD_SUFFIX) and verb in ("GET", "HEAD"):
        name = rest[:-len(CARD_SUFFIX)]
        kind = "card"
    elif verb == "POST":
        name, kind = rest, "rpc"
    else:
        return None
    if not name or "/" in name:
        return None
    return kind, name


def _read_body(environ: dict, limit: int) -> bytes | None:
    """The body, or None when it is larger than ``limit``."""
    length = environ.get("CONTENT_LENGTH")
    stream = environ["wsgi.input"]
    if length:
        try:
            size = int(length)
        except ValueError:
            size = -1
        if size > limit:
            return None
        if size >= 0:
            return stream.read(size) if size else b""
    data = stream.read(limit + 1)
    return None if len(data) > limit else data


def handle(hub, environ, start_response):
    """The WSGI entry: one answer per request."""
    path = environ.get("PATH_INFO", "")
    if path == "/metrics" and hub.metrics is not None:
        return _metrics_page(hub, environ, start_response)
    in_group = path == "/a2a/v1" or path.startswith("/a2a/v1/")
    if not in_group or not hub.config.public_url:
        return _plain(start_response, 404, {"error": "not found"}, a2a=in_group)
    route = _route(path, environ.get("REQUEST_METHOD", "GET"))
    if route is None:
        return _plain(start_response, 404, {"error": "not found"})
    kind, name = route
    try:
        tenant, subject = hub.credentials.tenant_of(environ)
    except HubRefusal as ex:
        return _plain(start_response, ex.status, {"error": ex.error}, ex.challenge)
    if not hub.published(tenant, name):
        # NOTE: unknown, unpublished and another tenant's agents answer alike.
        return _plain(start_response, 404, {"error": "agent not found"})
    if kind == "card":
        data = hub.cards[(tenant, name)]
        start_response("200 OK", [JSON, ("Content-Length", str(len(data))), *A2A_HEADERS])
        return [data]
    raw = _read_body(environ, hub.limits(tenant)["max_body_bytes"])
    if raw is None:
        limit = hub.limits(tenant)["max_body_bytes"]
        err = InvalidRequestError(f"the JSON-RPC body is larger than {limit} bytes")
        return _rpc(start_response, rpc_error(None, err), 413)
    request_id = None
    try:
        request_id, method, params = check_envelope(parse_json(raw))
        call = Call(request_id, method, tenant, subject, name, environ)
        if hub.metrics is not None:
            hub.metrics.request(method)
        result = _call(hub, call, params)
    except RpcError as ex:
        request_id = getattr(ex, "request_id", request_id)
        return _rpc(start_response, rpc_error(request_id, ex))
    except StoreError as ex:
        # NOTE: logged where it failed (the store); the client gets the public message.
        return _rpc(start_response, rpc_error(request_id, InternalError(
            f"Internal error: {ex}")))
    except Exception:  # noqa: BLE001 - the one place every failure is caught
        logger.exception("a request to %s/%s failed inside the hub", tenant, name)
        return _rpc(start_response, rpc_error(request_id, InternalError(
            "Internal error: the hub could not answer this request")))
    if isinstance(result, HubStream):
        try:
            start_response("200 OK", [*SSE, *A2A_HEADERS])
        except BaseException:
            result.close()
            raise
        return result
    text = result if isinstance(result, RawJSON) else compact_utf8(result)
    data = wire_rpc.result(request_id, text, compact_utf8).encode()
    return _rpc(start_response, data)


def _metrics_page(hub, environ, start_response):
    """``GET /metrics``: every worker's counts; an operator's JWT only (it counts every tenant)."""
    if not hub.credentials.is_operator(environ):
        return _plain(start_response, 401, {"error": "unauthenticated"},
                      'Bearer realm="murmur-hub"', a2a=False)
    data = hub.metrics.render()
    start_response("200 OK", [("Content-Type", hub.metrics.content_type),
                              ("Content-Length", str(len(data))),
                              ("Cache-Control", "no-store")])
    return [data]


def check_version(environ: dict) -> None:
    """``A2A-Version`` must be exactly ``1.0``: any other value, or none, is -32009."""
    raw = environ.get("HTTP_A2A_VERSION")
    if raw is None or raw.strip(" \t") != "1.0":
        raise VersionNotSupportedError("" if raw is None else raw.strip(" \t"))


def _call(hub, call: Call, raw_params):
    check_version(call.environ)
    handler = hub.methods.get(call.method)
    if handler is None:
        if call.method in PUSH_METHODS:
            raise UnsupportedOperationError("push notifications are not enabled on this hub")
        if call.method == "GetExtendedAgentCard":
            raise ExtendedAgentCardNotConfiguredError()
        raise MethodNotFoundError()
    if raw_params is ABSENT or raw_params is None:
        call.params = {}
    elif isinstance(raw_params, dict):
        call.params = raw_params
    else:
        raise InvalidParamsError("Invalid params: params must be an object")
    check_id_bytes(call.method, call.params, hub.limits(call.tenant)["max_id_bytes"])
    return handler(hub, call)
