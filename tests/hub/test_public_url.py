"""The cards' base URL: ``--public-url``, ``MURMUR_HUB_PUBLIC_URL``, and the boot warning."""
from __future__ import annotations

import pytest

from murmur_wsgi.hub.cli import public_url_warning
from murmur_wsgi.hub.config import load_config


def test_the_environment_sets_the_public_url():
    config = load_config({"public_url": "http://localhost:41880"},
                         environ={"MURMUR_HUB_PUBLIC_URL": "http://127.0.0.1:41881"})
    assert config.public_url == "http://127.0.0.1:41881"


def test_another_loopback_port_is_one_line():
    assert public_url_warning("http://localhost:41880", "127.0.0.1:41881") == (
        "public_url http://localhost:41880 names port 41880, but the hub listens on "
        "127.0.0.1:41881: its cards send clients elsewhere; give --public-url "
        "http://127.0.0.1:41881 (or set MURMUR_HUB_PUBLIC_URL)")


@pytest.mark.parametrize("public_url, listen", [
    ("http://localhost:41880", "127.0.0.1:41880"),
    ("https://agents.example.com", "127.0.0.1:41880"),      # a proxy in front
    ("http://localhost:41880", "0.0.0.0:8000"),             # not a loopback listener
    (None, "127.0.0.1:41880"),
])
def test_no_warning_when_nothing_contradicts(public_url, listen):
    assert public_url_warning(public_url, listen) is None
