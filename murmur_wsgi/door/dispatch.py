"""The request path: the numbered steps of "What the door answers", and rendering.

HTTP tier (steps 1-5) never reads the body; RPC tier (6-14) reads it once.
Every ``DoorError`` becomes its wire answer here, and only here is
``Exception`` caught: it is logged and answered -32603, never a traceback.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from murmur_wsgi.door import methods, metrics
from murmur_wsgi.door.context import CallContext, RpcCall
from murmur_wsgi.errors import DoorError, InternalError, Refusal, RpcError
from murmur_wsgi.door.middleware import (auth, body, completion, params, peer, planes, public,
                                         tenant, version)
from murmur_wsgi.serving import envelope
from murmur_wsgi.serving.answers import JSON_HEADERS, refusal_response, rpc_error, status_line
from murmur_wsgi.serving.ows import OWS
from murmur_wsgi.door.session.trace import AUTH_REFUSALS
from murmur_wsgi.door.streams.sse import EventStream
from murmur_wsgi.wire import rpc as wire_rpc
from murmur_wsgi.wire.encode import compact_ascii
from murmur_wsgi.wire.raw import RawJSON, RawJSONPieces
from murmur_wsgi.serving.writes import encoded, utf8_length

logger = logging.getLogger(__name__)
access_log = logging.getLogger("murmur_wsgi.access")



def _extensions(environ: dict) -> frozenset:
    raw = environ.get("HTTP_A2A_EXTENSIONS")
    if not raw:
        return frozenset()
    return frozenset(part.strip(OWS) for part in raw.split(",") if part.strip(OWS))


def http_tier(door, environ: dict) -> tuple[CallContext, bytes | tuple]:
    """Steps 1-5: answer a public route or a plane, or return the JSON-RPC body."""
    answer = public.route(environ, door)                                  # step 1
    if answer is not None:
        return None, answer
    ctx = CallContext()
    auth.check_token(environ, ctx, door.tokens)                           # step 2
    peer.check_consent(environ, ctx, door.manifest.peer_accept)           # step 3
    answer = metrics.route(environ, ctx, door)                            # GET /metrics
    if answer is not None:
        return ctx, answer
    answer = planes.route(environ, ctx, door)                             # step 4
    if answer is not None:
        return ctx, answer
    return ctx, body.read_body(environ, door.manifest.limits["max_body_bytes"])  # step 5


def rpc_tier(door, environ: dict, ctx: CallContext, raw: bytes):
    """Steps 6-14: read the JSON-RPC request and call its handler."""
    limits = door.manifest.limits
    payload = envelope.parse_json(raw, limits["max_json_depth"], limits["max_json_values"])  # step 6
    request_id, name, raw_params = envelope.check_envelope(payload)       # step 7
    environ[metrics.METHOD_KEY] = name                    # for the access log and the metrics
    call = RpcCall(request_id, name, None, ctx, environ)
    try:
        version.check(environ)                                            # step 8
        ctx.extensions = _extensions(environ)
        if completion.check(call, door.session):                          # step 9
            method = methods.COMPLETION      # steps 10 and 11 are not a completion's
        else:
            method = methods.lookup(name, door)                           # step 10
            auth.check_scope(call, door.tokens)                           # step 11
        call.params = params.check(raw_params)                            # step 12
        tenant.check(call.params)                                         # step 13
        return call, method.handler(door, call, method.read(door, call))  # step 14
    except DoorError as ex:
        ex.request_id = request_id
        raise
    except Exception:  # noqa: BLE001 - logged here, answered -32603 with the request's id
        logger.exception("method %s failed inside the door", name)
        err = InternalError()
        err.request_id = request_id
        raise err from None


class StreamNotStarted(RuntimeError):
    """The server's start_response refused a stream's headers (the stream is closed)."""


def rpc_response(request_id, result, budget: int) -> tuple[int, Iterable[bytes]]:
    """A JSON-RPC success as (its length in bytes, the body), reusing a result already JSON.

    A ``RawJSONPieces`` result is encoded as it is written, ``budget`` characters at
    a time (``writes.encoded``): the answer holds its pieces, shared, not a copy.
    """
    if isinstance(result, RawJSONPieces):
        pieces = (wire_rpc.head(request_id) + ',"result":', *result, "}")
        return utf8_length(pieces), encoded(pieces, budget)
    text = result if isinstance(result, RawJSON) else compact_ascii(result)
    data = wire_rpc.result(request_id, text).encode()
    return len(data), [data]


def dispatch(door, environ: dict, start_response):
    """The WSGI entry: run the tiers and write one answer."""
    started = time.perf_counter()
    call = None
    try:
        ctx, answer = http_tier(door, environ)
        if isinstance(answer, tuple):
            status, headers, data = answer
            start_response(status, headers)
            door.metrics.request(environ, None, "ok", int(status[:3]), started)
            return [data] if isinstance(data, bytes) else data    # a plane's streamed file
        call, result = rpc_tier(door, environ, ctx, answer)
        if isinstance(result, EventStream):
            headers = list(result.headers)
            if call.used_extensions:
                headers.append(("A2A-Extensions", ", ".join(call.used_extensions)))
            try:
                start_response("200 OK", headers)
            except BaseException:
                result.close()          # release its ring reader; the server answers the failure
                raise StreamNotStarted() from None
            door.metrics.request(environ, call, "stream", 200, started, result)
            return result
        length, body = rpc_response(call.id, result, door.manifest.stream["pending_bytes"])
        headers = [JSON_HEADERS, ("Content-Length", str(length))]
        if call.used_extensions:
            headers.append(("A2A-Extensions", ", ".join(call.used_extensions)))
        start_response("200 OK", headers)
        door.metrics.request(environ, call, "ok", 200, started, result)
        return body
    except Refusal as ex:
        if ex.error in AUTH_REFUSALS:
            door.session.trace.auth_refused(ex.status, ex.error)     # never the token
        status, headers, data = refusal_response(ex)
        door.metrics.request(environ, call, ex.error, ex.status, started)
        start_response(status, headers)
        return [data]
    except RpcError as ex:
        data = rpc_error(getattr(ex, "request_id", None), ex)
        status = ex.http_status
        door.metrics.request(environ, call, str(ex.code), status, started, ex)
        start_response(status_line(status),
                       [JSON_HEADERS, ("Content-Length", str(len(data)))])
        return [data]
    except StreamNotStarted:
        raise                   # the server refused the stream's headers: nothing to answer
    except Exception:  # noqa: BLE001 - the one place every failure is caught
        logger.exception("request failed inside the door")
        request_id = call.id if call is not None else None
        data = rpc_error(request_id, InternalError())
        door.metrics.request(environ, call, str(InternalError.code), 200, started)
        start_response("200 OK", [JSON_HEADERS, ("Content-Length", str(len(data)))])
        return [data]
