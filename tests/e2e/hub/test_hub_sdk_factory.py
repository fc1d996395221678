"""docs/interop.md's recipe, exactly: a2a-sdk's ``ClientFactory`` reaching a hub agent with
its key — the card fetched with the header (``resolver_http_kwargs``), every call
authenticated by the SDK's ``AuthInterceptor`` from the card's ``apiKey`` scheme."""
from __future__ import annotations

import hashlib

import httpx
import pytest
from a2a.client import (AgentCardResolutionError, AuthInterceptor, ClientConfig, ClientFactory,
                        CredentialService)
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from tests.e2e.hub_process import PREFIX, WAIT, HubProcess
from tests.e2e.sdk_util import collect, message, run

pytestmark = pytest.mark.e2e

KEY = "mhk_e2e-factory-acme"


class ApiKey(CredentialService):
    """The tenant's key for the card's ``apiKey`` scheme."""

    def __init__(self, key: str):
        self.key = key

    async def get_credentials(self, security_scheme_name, context):
        return self.key if security_scheme_name == "apiKey" else None


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    def config(port):
        return {"public_url": f"http://127.0.0.1:{port}",
                "tenants": {"acme": {"api_keys": [hashlib.sha256(KEY.encode()).hexdigest()],
                                     "agents": {"echo": {"agent": "demo", "publish": True}}}}}
    server = HubProcess(tmp_path_factory.mktemp("hub-factory"), config, agent="echo", key=KEY)
    yield server
    server.stop()


def test_client_factory_reaches_a_hub_agent_with_its_key(hub):
    url = f"{hub.url}{PREFIX}echo"

    async def scenario():
        async with httpx.AsyncClient(timeout=WAIT) as http:      # no default headers
            factory = ClientFactory(ClientConfig(httpx_client=http, streaming=False))
            client = await factory.create_from_url(
                url, resolver_http_kwargs={"headers": {"X-API-Key": KEY}},
                interceptors=[AuthInterceptor(ApiKey(KEY))])
            try:
                (sent,) = await collect(client.send_message(message("hello from the SDK")))
                got = await client.get_task(GetTaskRequest(id=sent.task.id))
                return client._card, sent.task, got
            finally:
                await client.close()

    card, task, got = run(scenario(), WAIT)
    assert card.supported_interfaces[0].url == url
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "hello from the SDK"
    assert got.id == task.id


def test_without_the_header_the_card_is_refused(hub):
    async def scenario():
        async with httpx.AsyncClient(timeout=WAIT) as http:
            return await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(
                f"{hub.url}{PREFIX}echo")

    with pytest.raises(AgentCardResolutionError) as info:
        run(scenario(), WAIT)
    assert "401" in str(info.value)
