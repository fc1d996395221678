"""Push switches: push.enabled needs push.secret (>= 32 bytes) and public_url; the card."""
from __future__ import annotations

import json
import logging

import pytest

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import ConfigError, load_config
from tests.hub.conftest import HubClient, hub_config
from tests.hub.push_util import SECRET, push_config


def config_with(push: dict, **top) -> dict:
    config = hub_config(**top)
    config["push"] = push
    return config


@pytest.mark.parametrize("push, top, env, line", [
    pytest.param({"enabled": True}, {}, {}, "push.secret: is required when push.enabled is "
                 "true", id="no-secret"),
    pytest.param({"enabled": True, "secret": "s" * 31}, {}, {},
                 "push.secret: must be at least 32 bytes", id="short-secret"),
    pytest.param({"enabled": True, "secret": "é" * 15}, {}, {},
                 "push.secret: must be at least 32 bytes", id="short-in-bytes"),
    pytest.param({"enabled": True, "secret": SECRET}, {"public_url": None}, {},
                 "public_url: is required when push.enabled is true", id="no-public-url"),
    pytest.param({"enabled": "yes", "secret": SECRET}, {}, {}, "push.enabled: Not a valid "
                 "boolean", id="not-boolean"),
    # NOTE: accepted before: 1 and 1.0 equal True in Python, 0 equals False.
] + [pytest.param({"enabled": value, "secret": SECRET}, {}, {},
                  "push.enabled: Not a valid boolean", id=f"number-{value!r}")
     for value in (1, 1.0, 0)] + [
    pytest.param({}, {}, {"MURMUR_HUB_PUSH_ENABLED": "1", "MURMUR_HUB_PUSH_SECRET": SECRET},
                 "MURMUR_HUB_PUSH_ENABLED (push.enabled): Not a valid boolean",
                 id="env-number"),
    pytest.param({}, {}, {"MURMUR_HUB_PUSH_ENABLED": "true"},
                 "push.secret: is required", id="env-enabled-no-secret"),
    pytest.param({"enabled": True, "secret": SECRET, "ports": [0]}, {}, {},
                 "push.ports[0]: Must be greater than or equal to 1", id="port"),
    pytest.param({"enabled": True, "secret": SECRET, "ports": []}, {}, {},
                 "push.ports: Shorter than minimum length 1", id="no-ports"),
    pytest.param({"allow_networks": ["loopback"]}, {}, {},
                 "push.allow_networks[0]: 'loopback' is not a network", id="network"),
    pytest.param({"retry_scale": 0}, {}, {},
                 "push.retry_scale: Must be greater than 0", id="retry-scale-zero"),
    pytest.param({"retry_scale": 2}, {}, {},
                 "push.retry_scale: Must be greater than 0 and less than or equal to 1",
                 id="retry-scale-over-one"),
    pytest.param({"ca_file": "/nonexistent/ca.pem"}, {}, {},
                 "push.ca_file: '/nonexistent/ca.pem' is not a readable file", id="ca-file"),
])
def test_bad_push_settings_name_the_key(push, top, env, line):
    with pytest.raises(ConfigError) as info:
        load_config(config_with(push, **top), environ=env)
    assert str(info.value).startswith(line), str(info.value)
    assert "\n" not in str(info.value)


def test_cli_exits_2_naming_push_secret(tmp_path, capsys):
    from murmur_wsgi.cli import main

    path = tmp_path / "hub.yaml"
    path.write_text(json.dumps(config_with({"enabled": True})))
    assert main(["hub", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"murmur-wsgi: {path}: push.secret: is required when push.enabled")
    assert err.count("\n") == 1


def test_secret_and_switch_from_the_environment():
    config = load_config(hub_config(), environ={"MURMUR_HUB_PUSH_ENABLED": "true",
                                                "MURMUR_HUB_PUSH_SECRET": SECRET,
                                                "MURMUR_HUB_PUSH_PORTS": "443,8443"})
    assert config.push["enabled"] is True
    assert config.push["secret"] == SECRET
    assert config.push["ports"] == [443, 8443]


def test_ports_default_to_443():
    config = load_config(config_with({"enabled": True, "secret": SECRET}))
    assert config.push["ports"] == [443]


def test_card_says_push_notifications_true():
    hub = create_hub(push_config())
    try:
        card = HubClient(hub).card()
        assert card.status_code == 200
        assert card.get_json()["capabilities"] == {"streaming": True,
                                                   "pushNotifications": True}
    finally:
        hub.close(drain_timeout=1)


def test_card_without_push_says_false(rpc):
    assert rpc.card().get_json()["capabilities"]["pushNotifications"] is False


def test_allow_networks_warns_at_boot(caplog):
    with caplog.at_level(logging.WARNING, logger="murmur_wsgi.hub.push.service"):
        hub = create_hub(push_config(allow_networks=["127.0.0.0/8"]))
    hub.close(drain_timeout=1)
    assert any("push.allow_networks is set (127.0.0.0/8)" in r.getMessage()
               and "never production" in r.getMessage() for r in caplog.records)


def test_no_warning_without_allow_networks(caplog):
    with caplog.at_level(logging.WARNING, logger="murmur_wsgi.hub.push.service"):
        hub = create_hub(push_config())
    hub.close(drain_timeout=1)
    assert not [r for r in caplog.records if "allow_networks" in r.getMessage()]


def test_retry_scale_warns_at_boot_and_scales_the_waits(caplog):
    with caplog.at_level(logging.WARNING, logger="murmur_wsgi.hub.push.service"):
        hub = create_hub(push_config(retry_scale=0.01))
    hub.close(drain_timeout=1)
    assert hub.push.sender.delays == pytest.approx((0.01, 0.02, 0.04))
    assert any("push.retry_scale is 0.01" in r.getMessage()
               and "never production" in r.getMessage() for r in caplog.records)


def test_retry_waits_are_one_two_four_seconds_by_default():
    hub = create_hub(push_config())
    hub.close(drain_timeout=1)
    assert hub.push.sender.delays == (1.0, 2.0, 4.0)


@pytest.mark.parametrize("block, key, line", [
    (("tenants", "acme", "agents", "hidden"), "publish",
     "tenants.acme.agents.hidden.publish: Not a valid boolean"),
    (("metrics",), "enabled", "metrics.enabled: Not a valid boolean"),
])
@pytest.mark.parametrize("value", [1, 1.0, 0])
def test_the_other_switches_are_booleans_too(block, key, line, value):
    config = hub_config()
    where = config
    for name in block:
        where = where.setdefault(name, {})
    where[key] = value
    with pytest.raises(ConfigError) as info:
        load_config(config, environ={})
    assert str(info.value) == line + "."
