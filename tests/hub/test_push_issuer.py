"""Push's JWT names the hub (``iss``) as its cards do: a ``public_url`` with an
internationalized host is announced in its ASCII form (IDNA, serving/urls.py), and a
receiver that configured the hub's URL from a card verifies ``iss`` against that."""
from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.hub.conftest import HubClient, close_hub, send_params
from tests.hub.push_util import cert, receiver, push_hub, verify  # noqa: F401

pytestmark = pytest.mark.one_store

IDN_PUBLIC = "https://hüb.example:8443"


def test_the_jwts_issuer_is_the_url_the_cards_announce(receiver):
    """Before, ``iss`` was ``https://hüb.example:8443`` as written, the cards'
    ``https://xn--hb-xka.example:8443``: a receiver checking it refused every notification."""
    hub = push_hub(receiver, public_url=IDN_PUBLIC)
    try:
        rpc = HubClient(hub, "tokens")
        card_url = rpc.card().get_json()["supportedInterfaces"][0]["url"]
        parts = urlsplit(card_url)
        announced = f"{parts.scheme}://{parts.netloc}"
        assert announced == "https://xn--hb-xka.example:8443"
        config = {"id": "c1", "url": receiver.url()}
        rpc.result("SendMessage", send_params(
            "one", configuration={"taskPushNotificationConfig": config}))
        got = receiver.wait_for(1)
        task_id = got[0].json["task"]["id"]
        key = rpc.result("CreateTaskPushNotificationConfig", {
            "taskId": task_id, **config})["authentication"]["credentials"]
        assert verify(got[0], key, receiver.url(), issuer=announced)["iss"] == announced
    finally:
        close_hub(hub)
