"""Interoperability: the official a2a-sdk client drives a real ``gunicorn -k gevent`` door.

Every answer is the SDK's own parsed object: if the door wrote anything the
SDK's strict protobuf parse or its JSON-RPC checks refused, these tests would
fail there. The door is tests/e2e/conftest.py's ``door_server`` (conf/murmur.yaml:
the demo agent, ``task_acceptance: single``), so each test leaves no task live.
The SDK is async on httpx; each test runs its coroutine with ``asyncio.run``
under a deadline. Where the SDK and the reference disagree: docs/interop.md.
"""
from __future__ import annotations

import uuid

import httpx
import pytest
from a2a.client import (A2ACardResolver, A2AClientError, AuthInterceptor, ClientCallContext,
                        ClientConfig, ClientFactory, CredentialService)
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.types.a2a_pb2 import (CancelTaskRequest, GetExtendedAgentCardRequest, GetTaskRequest,
                               ListTasksRequest, Role, SubscribeToTaskRequest, TaskState)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from murmur_wsgi.client import DoorClient
from murmur_wsgi.door.session import records
from murmur_wsgi.uris import CAPSULE_URI, DOOR_URI, STREAM_URI

from tests.e2e.conftest import default_manifest, start_door
from tests.e2e.sdk_util import collect, kind, message, sdk_client
from tests.e2e.sdk_util import run as run_within

pytestmark = pytest.mark.e2e

WAIT = 15.0                     # seconds: each test's deadline, and the SDK's HTTP timeout
S = TaskState


def run(coro):
    """Run a test's coroutine to its end, or fail at the deadline."""
    return run_within(coro, WAIT)


def sdk(door, *, streaming: bool = False, polling: bool = False):
    """An SDK client built the documented way: card resolved from the door's URL."""
    return sdk_client(door.url, wait=WAIT, streaming=streaming, polling=polling)


def state_of(event):
    """The task state a task or status_update event carries, else None."""
    if kind(event) == "task":
        return event.task.status.state
    if kind(event) == "status_update":
        return event.status_update.status.state
    return None


def test_card_resolution(door_server):
    async def scenario():
        async with httpx.AsyncClient(timeout=WAIT) as http:
            card = await A2ACardResolver(http, door_server.url).get_agent_card()
        async with sdk(door_server) as client:
            transport = client._transport
            same = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        return card, transport, same

    card, transport, same = run(scenario())
    assert card.name == "my-agent" and card.capabilities.streaming
    assert not card.capabilities.push_notifications
    assert [e.uri for e in card.capabilities.extensions] == [DOOR_URI, CAPSULE_URI, STREAM_URI]
    # The SDK posts to the card's interface URL, over JSON-RPC, as A2A 1.0.
    assert isinstance(transport, JsonRpcTransport)
    assert transport.url == f"http://localhost:{door_server.port}"
    assert transport.httpx_client.headers["A2A-Version"] == "1.0"
    # A public door: the SDK answers the extended card from the card, without asking.
    assert same == card


def test_blocking_send(door_server):
    async def scenario():
        async with sdk(door_server) as client:
            return await collect(client.send_message(message("hello, door")))

    (event,) = run(scenario())
    assert kind(event) == "task"
    task = event.task
    assert task.id.startswith("tsk_") and task.context_id.startswith("ctx_")
    assert task.status.state == S.TASK_STATE_COMPLETED
    assert task.status.message.role == Role.ROLE_AGENT
    assert task.status.message.parts[0].text == "task completed"
    assert [(a.artifact_id, a.parts[0].text) for a in task.artifacts] == [
        ("response", "hello, door")]


def test_streaming_send(door_server):
    async def scenario():
        async with sdk(door_server, streaming=True) as client:
            return await collect(client.send_message(message("/stream 2")))

    events = run(scenario())
    kinds = [kind(e) for e in events]
    assert kinds[0] == "task" and events[0].task.status.state == S.TASK_STATE_SUBMITTED
    # No frames: the SDK does not activate the stream extension, so no message events.
    assert "message" not in kinds
    assert kinds[-2:] == ["artifact_update", "status_update"]
    response = events[-2].artifact_update
    assert response.artifact.artifact_id == "response" and response.last_chunk
    assert response.artifact.parts[0].text == "chunk 1\nchunk 2"
    assert events[-1].status_update.status.state == S.TASK_STATE_COMPLETED
    assert {e.status_update.task_id for e in events if kind(e) == "status_update"} == {
        events[0].task.id}


def test_get_task_and_list_tasks(door_server):
    context = f"ctx-sdk-{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with sdk(door_server) as client:
            sent = [(await collect(client.send_message(message(t, context))))[0].task
                    for t in ("first", "/fail second")]
            got = await client.get_task(GetTaskRequest(id=sent[0].id))
            listed = await client.list_tasks(ListTasksRequest(context_id=context))
            failed = await client.list_tasks(ListTasksRequest(
                context_id=context, status=S.TASK_STATE_FAILED, include_artifacts=True))
            paged = await client.list_tasks(ListTasksRequest(context_id=context, page_size=1))
            with pytest.raises(TaskNotFoundError) as missing:
                await client.get_task(GetTaskRequest(id="tsk_nope"))
            return sent, got, listed, failed, paged, missing.value

    sent, got, listed, failed, paged, missing = run(scenario())
    assert got == sent[0]
    assert [t.id for t in listed.tasks] == [sent[1].id, sent[0].id]   # newest change first
    assert listed.total_size == 2 and listed.next_page_token == ""
    assert not listed.tasks[1].artifacts                  # without includeArtifacts
    assert [t.status.message.parts[0].text for t in failed.tasks] == ["second"]
    assert paged.page_size == 1 and paged.next_page_token and len(paged.tasks) == 1
    assert missing.data == {"taskId": "tsk_nope"}


def test_cancel_task(door_server):
    async def scenario():
        async with sdk(door_server, polling=True) as client:
            (event,) = await collect(client.send_message(message("/sleep 30")))
            canceled = await client.cancel_task(CancelTaskRequest(id=event.task.id))
            with pytest.raises(TaskNotCancelableError) as again:
                await client.cancel_task(CancelTaskRequest(id=event.task.id))
            return event.task, canceled, again.value

    submitted, canceled, again = run(scenario())
    assert submitted.status.state == S.TASK_STATE_SUBMITTED     # polling: returnImmediately
    assert canceled.id == submitted.id and canceled.status.state == S.TASK_STATE_CANCELED
    assert again.data == {"taskId": submitted.id, "state": "TASK_STATE_CANCELED"}


def test_subscribe_to_task_through_input_required(door_server):
    async def scenario():
        async with sdk(door_server, polling=True) as poller, \
                sdk(door_server, streaming=True) as streamer:
            (event,) = await collect(poller.send_message(message("/ask Name?")))
            task = event.task
            seen, replied = [], False
            async for update in streamer.subscribe(SubscribeToTaskRequest(id=task.id)):
                seen.append(update)
                # The snapshot may already be waiting: the demo agent asks at once.
                if state_of(update) == S.TASK_STATE_INPUT_REQUIRED and not replied:
                    replied = True
                    await collect(poller.send_message(message("Ada", task.context_id,
                                                              task.id)))
            final = await poller.get_task(GetTaskRequest(id=task.id))
            return seen, final

    seen, final = run(scenario())
    assert kind(seen[0]) == "task"                          # the snapshot opens the stream
    states = [state_of(e) for e in seen if state_of(e)]
    assert S.TASK_STATE_INPUT_REQUIRED in states and states[-1] == S.TASK_STATE_COMPLETED
    assert [(a.artifact_id, a.parts[0].text) for a in final.artifacts] == [("response", "Ada")]


def test_input_required_and_reply(door_server):
    async def scenario():
        async with sdk(door_server) as client:
            (asked,) = await collect(client.send_message(message("/ask Which branch?")))
            task = asked.task
            (done,) = await collect(client.send_message(
                message("main", task.context_id, task.id)))
            return task, done.task

    asked, done = run(scenario())
    assert asked.status.state == S.TASK_STATE_INPUT_REQUIRED
    assert [(a.artifact_id, a.parts[0].text) for a in asked.artifacts] == [
        ("prompt", "Which branch?")]
    assert done.id == asked.id and done.status.state == S.TASK_STATE_COMPLETED
    assert done.artifacts[0].parts[0].text == "main"


def test_the_sdk_and_the_door_client_see_the_same_tasks(door_server):
    with DoorClient(door_server.url, timeout=WAIT) as door:
        events = list(door.stream("/stream 2"))
        ours = door.get(events[0].task_id)

    async def scenario():
        async with sdk(door_server) as client:
            return await client.get_task(GetTaskRequest(id=ours["id"]))

    theirs = run(scenario())
    assert [e.frame for e in events if e.frame] == ["connection-ack", "text", "text"]
    assert theirs.status.state == S.TASK_STATE_COMPLETED
    assert theirs.artifacts[0].parts[0].text == ours["artifacts"][0]["parts"][0]["text"]


def test_the_sdk_default_http_timeout_is_shorter_than_the_heartbeat():
    # What docs/interop.md warns about: the SDK's own httpx client gives up
    # after 5 s of silence, and the door's heartbeat comes every 15 s.
    async def default_timeout():
        async with httpx.AsyncClient() as http:      # what ClientFactory makes without one
            return http.timeout

    timeout = run(default_timeout())
    assert (timeout.connect, timeout.read) == (5.0, 5.0)


def test_activated_frames_end_the_sdks_stream_at_the_first_one(door_server):
    # The SDK stops a stream at its first `message` event; murmur frames are messages.
    frames_on = ClientCallContext(service_parameters={"A2A-Extensions": STREAM_URI})

    async def scenario():
        async with sdk(door_server, streaming=True) as client:
            return await collect(client.send_message(message("/stream 2"), context=frames_on))

    events = run(scenario())
    assert [kind(e) for e in events] == ["task", "message"]
    frame = events[1].message.metadata[STREAM_URI]
    assert frame["frame"] == "connection-ack" and frame["role"] == "client"


class Bearer(CredentialService):
    """Hands the SDK's AuthInterceptor one token for the door's ``bearer`` scheme."""

    def __init__(self, token: str):
        self.token = token

    async def get_credentials(self, security_scheme_name, context):
        return self.token if security_scheme_name == "bearer" else None


def operator_token(door, monkeypatch) -> str:
    """The door's operator token, from its running record."""
    monkeypatch.setenv(records.HOME_ENV, str(door.home))
    address = door.url.split("://", 1)[1]
    (record,) = [r for r in records.running_records() if r["url"] == address]
    return record["door_token"]


def test_bearer_door_through_the_sdks_auth_interceptor(tmp_path, monkeypatch):
    manifest = default_manifest()
    manifest["network"] = dict(manifest["network"], authentication={"scheme": "bearer"})
    with start_door(tmp_path, manifest) as door:
        token = operator_token(door, monkeypatch)

        async def scenario():
            async with httpx.AsyncClient(timeout=WAIT) as http:
                factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
                client = await factory.create_from_url(
                    door.url, interceptors=[AuthInterceptor(Bearer(token))])
                public = client._card
                (sent,) = await collect(client.send_message(message("with a token")))
                extended = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
                anonymous = factory.create(public)
                with pytest.raises(A2AClientError) as refused:
                    await anonymous.get_task(GetTaskRequest(id=sent.task.id))
                return public, sent.task, extended, refused.value

        public, task, extended, refused = run(scenario())
    assert public.capabilities.extended_agent_card
    assert public.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert task.status.state == S.TASK_STATE_COMPLETED
    assert [e.uri for e in extended.capabilities.extensions] == [DOOR_URI, CAPSULE_URI,
                                                                 STREAM_URI]
    # The SDK reports the 401 by status only; the door's {"error", "message"} goes unread.
    assert "HTTP Error 401" in str(refused)
