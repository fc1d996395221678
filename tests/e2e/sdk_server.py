"""a2a-sdk's own A2A server, as a process: ``python -m tests.e2e.sdk_server PORT``.

The SDK's ``DefaultRequestHandler`` over an in-memory task store, its Starlette
routes for the card (``/.well-known/agent-card.json``) and JSON-RPC (``/``), served
by uvicorn on 127.0.0.1:PORT. Its agent echoes the text back as an artifact;
``/sleep N`` works N seconds first (a task to list, subscribe to and cancel).
"""
from __future__ import annotations

import asyncio
import sys

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from starlette.applications import Starlette

MAX_SLEEP = 60.0                # seconds: the longest ``/sleep`` the agent honours


class Echo(AgentExecutor):
    """Echo the user's text as one artifact; ``/sleep N`` first works N seconds."""

    async def execute(self, context: RequestContext, event_queue) -> None:
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        text = context.get_user_input()
        if text.startswith("/sleep "):
            await asyncio.sleep(min(float(text.split()[1]), MAX_SLEEP))
        await updater.add_artifact([Part(text=text)], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue) -> None:
        task = context.current_task
        await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def card(port: int) -> AgentCard:
    return AgentCard(
        name="sdk-echo", description="a2a-sdk's own server, echoing", version="1.0",
        supported_interfaces=[AgentInterface(url=f"http://127.0.0.1:{port}/",
                                             protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echoes", tags=["echo"])])


def app(port: int) -> Starlette:
    agent_card = card(port)
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore(),
                                    agent_card=agent_card)
    return Starlette(routes=create_agent_card_routes(agent_card)
                     + create_jsonrpc_routes(handler, "/"))


if __name__ == "__main__":
    port = int(sys.argv[1])
    uvicorn.run(app(port), host="127.0.0.1", port=port, log_level="warning")
