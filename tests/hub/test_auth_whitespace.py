"""The hub's Authorization is read as the door's is: HTTP's
whitespace is space and tab; str.strip() took a latin-1 no-break space, NEL or the
information separators 0x1c-0x1f, so "Bearer <jwt>\\xa0" was the JWT."""
from __future__ import annotations

import pytest

from tests.hub.conftest import HubClient, token

pytestmark = pytest.mark.one_store

UNAUTHENTICATED = (401, {"error": "unauthenticated"})


@pytest.mark.parametrize("pad", ["\xa0", "\x85", "\x1c", "\x0b"])
def test_a_jwt_padded_with_other_whitespace_is_not_the_jwt(hub, pad):
    headers = {"Authorization": f"Bearer {token()}{pad}", "X-Tenant-ID": "acme"}
    response = HubClient(hub, "echo", headers).card()
    assert (response.status_code, response.get_json()) == UNAUTHENTICATED


@pytest.mark.parametrize("pad", ["", " ", "\t"])
def test_a_jwt_padded_with_http_whitespace_is_the_jwt(hub, pad):
    headers = {"Authorization": f"Bearer {token()}{pad}", "X-Tenant-ID": "acme"}
    assert HubClient(hub, "echo", headers).card().status_code == 200
