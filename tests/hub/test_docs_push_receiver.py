"""docs/hub.md's runnable push receiver accepts the notifications the hub signs, with and
without a token on the config, and refuses one whose body or token was changed."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from murmur_wsgi.hub.push import keys

DOC = Path(__file__).resolve().parents[2] / "docs" / "hub.md"
URL, HUB = "https://hooks.example.com/a2a", "https://hub.example.com"


def _receiver(key: bytes, token: str):
    """The doc's receiver, with the key Create returned and the token the config holds."""
    text = DOC.read_text(encoding="utf-8")
    source = re.search(r"A runnable receiver.*?```python\n(.*?)```", text, re.S).group(1)
    source = re.sub(r'^KEY = .*$', f"KEY = {keys.encode_key(key)!r}", source, flags=re.M)
    source = re.sub(r'^TOKEN = .*$', f"TOKEN = {token!r}", source, flags=re.M)
    scope: dict = {"__name__": "receiver"}
    exec(compile(source, str(DOC), "exec"), scope)
    return scope["app"].test_client()


def _post(client, key: bytes, token: str | None, body: bytes, sent_token: str | None = None,
          sent: bytes | None = None):
    """Status of the receiver's answer to a notification of ``body`` signed with ``key``
    (``sent``: the body that arrives instead, ``sent_token`` the header's token)."""
    headers = {"Content-Type": "application/json",
               "Authorization": "Bearer " + keys.sign(
                   key, issuer=HUB, audience=URL, task_id="t1", config_id="c1", seq=1,
                   body=body, token=token)}
    if (sent_token or token) is not None:
        headers["A2A-Notification-Token"] = sent_token or token
    return client.post("/a2a", data=body if sent is None else sent, headers=headers).status_code


@pytest.mark.parametrize("token", [None, "my-token"])
def test_the_receiver_takes_a_signed_notification(token):
    key = keys.derive_key(b"m" * 32, "acme", "echo", "t1", "c1")
    client = _receiver(key, token or "")
    body = json.dumps({"statusUpdate": {"taskId": "t1"}}).encode()
    assert _post(client, key, token, body) == 204
    assert _post(client, key, token, body, sent_token="other-token") == 401
    assert _post(_receiver(b"k" * 32, token or ""), key, token, body) == 401
    assert _post(client, key, token, body, sent=body.replace(b"t1", b"t2")) == 401
