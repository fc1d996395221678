"""docs/interop.md's recipe, exactly: a2a-sdk's ``ClientFactory`` reaching a hub agent with
its key — the card fetched with the header (``resolver_http_kwargs``), every call
authenticated by the SDK's ``AuthInterceptor`` from the card's ``apiKey`` scheme — and
its JWT variant: the token from the card's ``bearer`` scheme, ``X-Tenant-ID`` on the card
request and on the httpx client."""
from __future__ import annotations

import hashlib
import time

import httpx
import jwt
import pytest
from a2a.client import (AgentCardResolutionError, AuthInterceptor, ClientConfig, ClientFactory,
                        CredentialService)
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from tests.e2e.hub_process import PREFIX, WAIT, HubProcess
from tests.e2e.sdk_util import collect, message, run

pytestmark = pytest.mark.e2e

KEY = "mhk_e2e-factory-acme"
JWT_SECRET = "e2e-factory-jwt-secret-" + "z" * 24
TENANT = {"X-Tenant-ID": "acme"}


class Credential(CredentialService):
    """One credential for one of the card's schemes (``apiKey``, ``bearer``)."""

    def __init__(self, scheme: str, value: str):
        self.scheme = scheme
        self.value = value

    async def get_credentials(self, security_scheme_name, context):
        return self.value if security_scheme_name == self.scheme else None


def a_jwt() -> str:
    return jwt.encode({"sub": "e2e-factory", "tenants": ["acme"], "exp": int(time.time()) + 600},
                      JWT_SECRET, algorithm="HS256")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    def config(port):
        return {"public_url": f"http://127.0.0.1:{port}",
                "auth": {"jwt": {"secret": JWT_SECRET}},
                "tenants": {"acme": {"api_keys": [hashlib.sha256(KEY.encode()).hexdigest()],
                                     "agents": {"echo": {"agent": "demo", "publish": True}}}}}
    server = HubProcess(tmp_path_factory.mktemp("hub-factory"), config, agent="echo", key=KEY)
    yield server
    server.stop_soon()


def reach(url: str, card_headers: dict, interceptor: AuthInterceptor,
          client_headers: dict | None = None):
    """The recipe: the card fetched with ``card_headers``, a send and a GetTask after it."""
    async def scenario():
        async with httpx.AsyncClient(timeout=WAIT, headers=client_headers) as http:
            factory = ClientFactory(ClientConfig(httpx_client=http, streaming=False))
            client = await factory.create_from_url(
                url, resolver_http_kwargs={"headers": card_headers}, interceptors=[interceptor])
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


def test_client_factory_reaches_a_hub_agent_with_its_key(hub):
    reach(f"{hub.url}{PREFIX}echo", {"X-API-Key": KEY},            # no default headers
          AuthInterceptor(Credential("apiKey", KEY)))


def test_client_factory_reaches_a_hub_agent_with_a_jwt_and_its_tenant(hub):
    token = a_jwt()
    reach(f"{hub.url}{PREFIX}echo", {"Authorization": f"Bearer {token}", **TENANT},
          AuthInterceptor(Credential("bearer", token)), client_headers=TENANT)


def test_a_jwt_without_the_tenant_header_is_refused_its_card(hub):
    async def scenario():
        async with httpx.AsyncClient(timeout=WAIT) as http:
            return await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(
                f"{hub.url}{PREFIX}echo",
                resolver_http_kwargs={"headers": {"Authorization": f"Bearer {a_jwt()}"}})

    with pytest.raises(AgentCardResolutionError) as info:
        run(scenario(), WAIT)
    assert "401" in str(info.value)


def test_without_the_header_the_card_is_refused(hub):
    async def scenario():
        async with httpx.AsyncClient(timeout=WAIT) as http:
            return await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(
                f"{hub.url}{PREFIX}echo")

    with pytest.raises(AgentCardResolutionError) as info:
        run(scenario(), WAIT)
    assert "401" in str(info.value)
