"""``A2AClient``: one agent of any A2A v1.0 server over one pooled ``requests.Session``.

The client takes an agent's base URL (a door's ``http://host:port``, a hub
agent's ``…/a2a/v1/agents/NAME``) or its card's URL. It reads the card first
and posts every JSON-RPC request to the card's ``supportedInterfaces[0].url``
exactly when it shares the agent URL's origin (else to the base URL), with
``A2A-Version: 1.0`` and the credential on every request, the card's
included: ``api_key`` as ``X-API-Key``, ``token`` as ``Authorization: Bearer``,
``tenant`` as ``X-Tenant-ID``, and any ``headers``. A door's own
methods (``watch``, ``stop``) are there for the door; ``DoorClient`` is the
same class under its older name. Every call passes
``timeout=``: ``timeout`` for ordinary calls; a held SendMessage waits
``hold_timeout`` (None: as long as the task takes, since the door sets no
deadline on it); a stream's headers come within ``timeout`` and it waits
``stream_timeout`` between two bytes (the
door writes a heartbeat every 15 s, so silence beyond it means the
connection is dead, and the stream reconnects).

The credential stays with the origin (scheme, host, port) of the URL the caller
gave: a redirect is followed only within it (one elsewhere is an ``HttpRefusal``),
and a card naming its endpoint elsewhere is not followed.

Concurrency: the ``requests.Session`` is shared by every call of one
client. Calls from several threads work (each takes its own pooled
connection), as ``requests`` sessions are commonly used; a client that
must be strictly thread-safe makes one DoorClient per thread.
"""
from __future__ import annotations

import itertools
import json
import logging
import uuid
from urllib.parse import urlsplit
from typing import Iterator

import requests

from murmur_wsgi import __version__
from murmur_wsgi.client.errors import HttpRefusal, ProtocolError
from murmur_wsgi.client.http import JsonRpcHttp, media_type
from murmur_wsgi.client.deadline import headers_within, new_session
from murmur_wsgi.client.card import (agent_urls, card_endpoint, door_url,  # noqa: F401
                                     is_door, same_origin)
from murmur_wsgi.client.push import PushConfigs
from murmur_wsgi.client.seen import digest
from murmur_wsgi.client.streams import SUBSCRIBE, WATCH, EventStream
from murmur_wsgi.uris import STREAM_URI

logger = logging.getLogger(__name__)

A2A_VERSION = "1.0"
DEFAULT_TIMEOUT = 10.0
STREAM_READ_TIMEOUT = 45.0       # three heartbeats (DECISIONS §3: one every 15 s)
MAX_ANSWER_BYTES = 64 * 1024 ** 2   # an answer's body, or one event of a stream
# MEMORY: and the JSON values it holds, each an object once parsed (up to ~70 bytes: an
# empty dict). More than 64 MiB holds at 7 bytes a value: a ListTasks page of 100 tasks
# of 50,000 values each, or any answer within max_answer_bytes of ordinary JSON, parses;
# 64 MiB of ``[[],[],…]`` (22 million values, 1.6 GB parsed) does not.
MAX_ANSWER_VALUES = 10_000_000

# ListTasks filters by their Python names; any other keyword is sent as given.
LIST_FILTERS = {"context_id": "contextId", "state": "status", "status": "status",
                "page_size": "pageSize", "page_token": "pageToken",
                "status_timestamp_after": "statusTimestampAfter",
                "include_artifacts": "includeArtifacts", "history_length": "historyLength"}


def new_message_id() -> str:
    return "msg-" + uuid.uuid4().hex


def user_message(text_or_message, context_id: str | None = None,
                 task_id: str | None = None) -> dict:
    """A ROLE_USER message: ``text`` as one text part, or a message dict completed."""
    if isinstance(text_or_message, str):
        message = {"messageId": new_message_id(), "role": "ROLE_USER",
                   "parts": [{"text": text_or_message}]}
    elif isinstance(text_or_message, dict):
        message = dict(text_or_message)
        message.setdefault("messageId", new_message_id())
        message.setdefault("role", "ROLE_USER")
    else:
        raise TypeError("send() takes a text or a message dict, "
                        f"not {type(text_or_message).__name__}")
    if context_id is not None:
        message["contextId"] = context_id
    if task_id is not None:
        message["taskId"] = task_id
    return message


class A2AClient(PushConfigs, JsonRpcHttp):
    """A synchronous client of one A2A agent (a door, a hub agent, any A2A v1.0 server).

    Args:
        url: the agent's base URL (``http://host:port``, ``host:port``, a hub's
            ``http://host:port/a2a/v1/agents/NAME``) or its card's URL.
        token: a bearer token (an authenticated door, a hub's JWT), or None.
        api_key: an API key, sent as ``X-API-Key`` (a hub's tenant key), or None.
        tenant: the tenant a JWT acts for, sent as ``X-Tenant-ID``, or None.
        headers: more headers for every request (``{"X-Trace": "1"}``).
        timeout: seconds (or ``(connect, read)``) for every ordinary call.
        hold_timeout: seconds a held SendMessage waits; None waits for the task.
        stream_timeout: seconds a stream waits between two bytes before it reconnects
            (its headers come within ``timeout``).
        max_reconnects: failed attempts in a row to resume a dropped stream (one that
            does not connect, or drops before a new event) before ``StreamBroken``.
        reconnect_delay: the first back-off between two reconnect attempts.
        max_answer_bytes: the most bytes one answer (or one event of a stream) may
            hold; a longer one is a ``ProtocolError``. None: no limit.
        max_answer_values: the most JSON values one answer (or one event) may hold; one
            of more is a ``ProtocolError``, before it is parsed. None: no limit.
        session: a ``requests.Session`` to share; the client closes only its own. Its
            adapters are used as they are: ``new_session()`` makes one whose answers'
            headers are bounded by the read timeout, as the client's own.
    """

    def __init__(self, url: str, token: str | None = None, *, api_key: str | None = None,
                 tenant: str | None = None, headers: dict | None = None,
                 timeout=DEFAULT_TIMEOUT,
                 hold_timeout: float | None = None,
                 stream_timeout: float = STREAM_READ_TIMEOUT, max_reconnects: int = 5,
                 reconnect_delay: float = 0.25, session: requests.Session | None = None,
                 a2a_version: str = A2A_VERSION,
                 max_answer_bytes: int | None = MAX_ANSWER_BYTES,
                 max_answer_values: int | None = MAX_ANSWER_VALUES):
        self.url, self.card_url = agent_urls(url)
        self._endpoint: str | None = None
        self._card: dict | None = None
        self.token = token
        self.api_key = api_key
        self.tenant = tenant
        self.timeout = timeout
        self.hold_timeout = hold_timeout
        self.stream_timeout = stream_timeout
        self.max_reconnects = max_reconnects
        self.reconnect_delay = reconnect_delay
        self.max_answer_bytes = max_answer_bytes
        self.max_answer_values = max_answer_values
        self._owns_session = session is None
        self.session = session if session is not None else new_session()
        self.headers = {"A2A-Version": a2a_version,
                        "User-Agent": f"murmur-wsgi/{__version__} (+requests)"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        if api_key:
            self.headers["X-API-Key"] = api_key
        if tenant:
            self.headers["X-Tenant-ID"] = tenant
        self.headers.update(headers or {})
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    @property
    def endpoint(self) -> str:
        """Where JSON-RPC goes: the card's ``supportedInterfaces[0].url``, read once.

        A server that serves no card there (any refusal but 401 and 403, an answer
        that is not JSON) is posted to at its base URL; a 401 or 403 is raised.
        """
        if self._endpoint is None:
            try:
                self.card()
            except HttpRefusal as ex:
                if ex.status in (401, 403):
                    raise
            except ProtocolError:
                pass
            if self._endpoint is None:
                self._endpoint = self.url + "/"
        return self._endpoint

    @property
    def noun(self) -> str:
        """What the errors call the server: ``the door`` (a Murmur door), else ``the agent``."""
        if self._card is not None:
            return "the door" if is_door(self._card) else "the agent"
        return "the agent" if urlsplit(self.url).path.strip("/") else "the door"

    @property
    def known_card(self) -> dict | None:
        """The card this client last fetched, or None."""
        return self._card

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Close the pooled connections (only of a session this client made)."""
        if self._owns_session:
            self.session.close()

    def _body(self, method: str, params) -> tuple[int, str]:
        """``(id, text)``: a JSON-RPC request of ``method``, numbered from 1."""
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        return request_id, json.dumps(body)

    def call(self, method: str, params: dict | None = None, *, timeout=None,
             headers: dict | None = None):
        """Call ``method`` and return its result; raise the error the door answers."""
        hdrs = dict(self.headers, **{"Content-Type": "application/json"})
        hdrs.update(headers or {})
        request_id, body = self._body(method, params)
        response, data = self._request("POST", self.endpoint, data=body, headers=hdrs,
                                       timeout=self.timeout if timeout is None else timeout)
        return self._answer(response, data, request_id)

    def _open_stream(self, method: str, params: dict, *, frames: bool,
                     last_event_id: int | None):
        """POST a streaming method: the open ``text/event-stream`` response, and the id of
        the request, which each of its events names."""
        hdrs = dict(self.headers, **{"Content-Type": "application/json",
                                     "Accept": "text/event-stream"})
        if frames and method != WATCH:
            hdrs["A2A-Extensions"] = STREAM_URI
        if last_event_id is not None:
            hdrs["Last-Event-ID"] = str(last_event_id)
        timeout = (self._connect_timeout(), self.stream_timeout)
        request_id, body = self._body(method, params)
        # NOTE: its headers within an ordinary call's timeout (a server writes them at
        # once); ``stream_timeout`` bounds the silence between two of its bytes after.
        with headers_within(self._read_timeout()):
            response, _ = self._request("POST", self.endpoint, data=body, headers=hdrs,
                                        stream=True, timeout=timeout)
        if response.status_code == 200 and media_type(response) == "text/event-stream":
            return response, request_id
        data = self._read(response, timeout[1])
        self._answer(response, data, request_id)    # a refusal is one JSON body: raise it
        raise ProtocolError(f"{self.noun} at {self.url} answered {method} without a stream",
                            response=response, url=self.url)

    # --- the door's methods ----------------------------------------------------------

    def card(self) -> dict:
        """The agent card (GET …/.well-known/agent-card.json, with the credential)."""
        response, data = self._request("GET", self.card_url, timeout=self.timeout,
                                       headers=self.headers)
        if response.status_code != 200:
            raise self._refusal(response, data)
        try:
            card = self._loads(data, response)
        except ValueError as ex:
            raise ProtocolError(f"the card at {self.url} is not JSON", response=response,
                                url=self.url) from ex
        if not isinstance(card, dict):
            raise ProtocolError(f"the card at {self.url} is not a JSON object",
                                response=response, url=self.url)
        self._card = card
        endpoint = card_endpoint(card)
        if endpoint is not None and same_origin(endpoint, self.url):
            self._endpoint = endpoint
        elif endpoint is not None:
            logger.debug("the card at %s names its endpoint on another origin: not followed",
                         self.card_url)
        return card

    def extended_card(self) -> dict:
        """GetExtendedAgentCard: the authenticated card (-32004 on a public door)."""
        return self._object("GetExtendedAgentCard", self.call("GetExtendedAgentCard"))

    def send(self, text_or_message, context_id: str | None = None,
             task_id: str | None = None, return_immediately: bool = False, *,
             configuration: dict | None = None) -> dict:
        """SendMessage: the task once it settles, or at once with ``return_immediately``.

        ``text_or_message`` is a text or an A2A message dict; ``task_id`` makes
        it the reply to a task waiting in TASK_STATE_INPUT_REQUIRED. Returns the
        task (a completion's answer, a message, is returned as is).
        """
        config = dict(configuration or {})
        if return_immediately:
            config["returnImmediately"] = True
        params = {"message": user_message(text_or_message, context_id, task_id)}
        if config:
            params["configuration"] = config
        timeout = self.timeout if return_immediately else (self._connect_timeout(),
                                                           self.hold_timeout)
        result = self.call("SendMessage", params, timeout=timeout)
        if isinstance(result, dict) and isinstance(result.get("task"), dict):
            return self._task("SendMessage", result["task"])
        if isinstance(result, dict) and isinstance(result.get("message"), dict):
            return self._message("SendMessage", result["message"])
        raise ProtocolError(f"{self.noun} at {self.url} answered SendMessage with neither a task "
                            "nor a message", url=self.url)

    def stream(self, text_or_message, context_id: str | None = None,
               task_id: str | None = None, *, frames: bool = True,
               last_event_id: int | None = None) -> EventStream:
        """SendStreamingMessage: the task's events, murmur frames included with ``frames``."""
        params = {"message": user_message(text_or_message, context_id, task_id)}
        stream = EventStream(self, "SendStreamingMessage", params, frames=frames,
                             last_event_id=last_event_id)
        if task_id is not None:
            stream.task_id = task_id
        return stream

    def subscribe(self, task_id: str, *, frames: bool = True,
                  last_event_id: int | None = None) -> EventStream:
        """SubscribeToTask: the rest of a live task's events."""
        return EventStream(self, SUBSCRIBE, {"id": task_id}, frames=frames,
                           last_event_id=last_event_id)

    def watch(self, *, last_event_id: int | None = None) -> EventStream:
        """murmur.WatchSession: every task's events, until the door closes."""
        return EventStream(self, WATCH, {}, last_event_id=last_event_id)

    def get(self, task_id: str) -> dict:
        """GetTask."""
        return self._task("GetTask", self.call("GetTask", {"id": task_id}))

    def list_page(self, **filters) -> dict:
        """ListTasks: one page, ``{tasks, nextPageToken, pageSize, totalSize}``."""
        params = {}
        for name, value in filters.items():
            if value is not None:
                params[LIST_FILTERS.get(name, name)] = value
        page = self._object("ListTasks", self.call("ListTasks", params))
        if not isinstance(page.get("tasks", []), list):
            raise ProtocolError(f"{self.noun} at {self.url} answered ListTasks with tasks "
                                "that are not a list", url=self.url)
        return page

    def list(self, **filters) -> Iterator[dict]:
        """ListTasks: every task the filters match, page after page, newest change first.

        Filters: ``context_id``, ``state`` (a TASK_STATE_* name), ``page_size``,
        ``status_timestamp_after``, ``include_artifacts``; ``max_pages`` as ``list_pages``.
        Lazy: a page is fetched once the tasks before it are used, so a caller that stops
        (``break``, ``itertools.islice``) stops the fetching; one that reads to the end of
        a server naming pages forever reads forever, unless it gives ``max_pages``.
        """
        for page in self.list_pages(**filters):
            yield from (t for t in page.get("tasks") or [] if isinstance(t, dict))

    def list_pages(self, *, max_pages: int | None = None, **filters) -> Iterator[dict]:
        """ListTasks page after page (``{tasks, nextPageToken, …}``), lazily, at most
        ``max_pages`` (None: to the last): the last page yielded names a
        ``nextPageToken`` when the pages were cut short. Filters: as ``list``."""
        first = filters.pop("page_token", None) or ""
        return self._pages("ListTasks", first,
                           lambda token: self.list_page(page_token=token or None, **filters),
                           max_pages)

    def _pages(self, method: str, token: str, fetch,
               max_pages: int | None = None) -> Iterator[dict]:
        """Each page ``fetch(token)`` answers, following ``nextPageToken`` to the last, or
        to ``max_pages`` pages.

        A token that is not a string, or one that comes back (pages that loop), is a
        ProtocolError. What is kept of each token seen is its digest, whatever its size.
        """
        seen = {digest(token)}
        for _ in itertools.count() if max_pages is None else range(max_pages):
            page = self._object(method, fetch(token))
            yield page
            token = page.get("nextPageToken") or ""
            if not isinstance(token, str):
                raise ProtocolError(f"{self.noun} at {self.url} answered {method} with a "
                                    "nextPageToken that is not a string", url=self.url)
            if not token:
                return
            kept = digest(token)
            if kept in seen:
                raise ProtocolError(f"{self.noun} at {self.url} answered {method} with "
                                    f"nextPageToken {token[:40]!r} again: its pages loop",
                                    url=self.url)
            seen.add(kept)

    def cancel(self, task_id: str) -> dict:
        """CancelTask: the task, canceled (-32002 when it had already ended)."""
        return self._task("CancelTask", self.call("CancelTask", {"id": task_id}))

    def stop(self) -> dict:
        """murmur.StopSession: ``{canceled, residue, session_id}``; the door keeps serving."""
        return self._object("murmur.StopSession", self.call("murmur.StopSession", {}))


DoorClient = A2AClient
