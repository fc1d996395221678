"""The cards' base URL: ``--public-url``, ``MURMUR_HUB_PUBLIC_URL``, and the boot warning."""
from __future__ import annotations

from pathlib import Path

import pytest

from murmur_wsgi import cli
from murmur_wsgi.hub.cli import PUBLIC_URL_ENV, public_url_warning
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


def test_a_refused_public_url_flag_is_named_as_the_flag(monkeypatch, capsys):
    """``--public-url`` reaches gunicorn's workers as ``MURMUR_HUB_PUBLIC_URL``: its
    refusal named that variable and hub.yaml (``conf/hub.yaml: MURMUR_HUB_PUBLIC_URL
    (public_url): …``), neither of which the user had set."""
    # NOTE: set, then removed: the variable the command sets is taken away after the test
    # (a delenv of a variable not set records nothing to restore).
    monkeypatch.setenv(PUBLIC_URL_ENV, "")
    monkeypatch.delenv(PUBLIC_URL_ENV)
    config = Path(__file__).resolve().parents[2] / "conf" / "hub.yaml"
    code = cli.main(["hub", "--config", str(config), "--listen", "127.0.0.1:1",
                     "--public-url", "http://x/path"])
    assert code == 2
    assert capsys.readouterr().err == ("murmur-wsgi: --public-url: 'http://x/path' must be a "
                                       "host only: no path, query or fragment\n")

