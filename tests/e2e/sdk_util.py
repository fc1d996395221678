"""The official a2a-sdk client as the e2e tests drive a real door or hub with it.

The SDK is async on httpx: a test runs its coroutine with ``run`` under a
deadline; ``sdk_client`` builds a client the documented way, its card resolved
from ``url``, with an httpx client that reads for ``wait`` seconds (the SDK's
own would read with httpx's 5 s default; see docs/interop.md).
"""
from __future__ import annotations

import asyncio
import contextlib
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest


def run(coro, wait: float):
    """Run a test's coroutine to its end, or fail after ``wait`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, wait))


@contextlib.asynccontextmanager
async def sdk_client(url: str, *, wait: float, headers: dict | None = None,
                     streaming: bool = False, polling: bool = False):
    """An SDK client of the agent at ``url``; ``headers`` go with every request."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(wait), headers=headers) as http:
        config = ClientConfig(streaming=streaming, polling=polling, httpx_client=http)
        client = await ClientFactory(config).create_from_url(url)
        try:
            yield client
        finally:
            await client.close()


def message(text: str, context_id: str = "", task_id: str = "") -> SendMessageRequest:
    """A SendMessageRequest of one text part, with a fresh messageId."""
    return SendMessageRequest(message=Message(
        message_id=f"msg-{uuid.uuid4().hex}", role=Role.ROLE_USER, parts=[Part(text=text)],
        context_id=context_id, task_id=task_id))


async def collect(events) -> list:
    return [event async for event in events]


def kind(event) -> str:
    """Which payload a StreamResponse carries: task, message, status_update, artifact_update."""
    return event.WhichOneof("payload")
