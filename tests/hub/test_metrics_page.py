"""``/metrics`` is a page to GET (or HEAD), an operator's JWT only; any other method there
is answered as a path the hub does not serve. Before, a POST, PUT or DELETE was answered
the page."""
from __future__ import annotations

import pytest
from werkzeug.test import Client

from murmur_wsgi.hub import create_hub

from tests.hub.conftest import close_hub, hub_config, token


@pytest.fixture
def metered():
    hub = create_hub(hub_config(metrics={"enabled": True}))
    yield Client(hub)
    close_hub(hub)


def _answer(response) -> tuple:
    return response.status_code, sorted(response.headers.items()), response.get_data()


OPERATOR = {"Authorization": f"Bearer {token(role='operator')}"}


def test_the_page_is_got_and_headed(metered):
    page = metered.get("/metrics", headers=OPERATOR)
    assert page.status_code == 200 and b"murmur_hub_requests" in page.get_data()
    head = metered.head("/metrics", headers=OPERATOR)
    assert head.status_code == 200 and head.get_data() == b""
    assert head.headers["Content-Length"] == page.headers["Content-Length"]


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_another_method_is_a_path_the_hub_does_not_serve(metered, method):
    unserved = _answer(metered.open("/nowhere", method=method, headers=OPERATOR))
    assert unserved[0] == 404
    assert _answer(metered.open("/metrics", method=method, headers=OPERATOR)) == unserved
