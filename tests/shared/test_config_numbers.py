"""Every number a configuration accepts is one the application can serve with.

A duration past ``settings.MAX_SECS`` (ten years) overflowed the platform's waits
(``threading.Event.wait(1e12)`` raises OverflowError): accepted at load, it broke
every CancelTask of a hub (``cancel_timeout_secs``) and every stream of a door
(``stream.heartbeat_secs``). An integer past ``settings.MAX_INT`` broke the float
arithmetic it feeds (``rate_per_minute: 10**400``: every SendMessage -32603). Both
are refused at load now, naming the key; the largest accepted values serve.
"""
from __future__ import annotations

import pytest

from murmur_wsgi.door.manifest import ManifestError
from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import ConfigError, load_config
from murmur_wsgi.hub.config_env import env_settings
from murmur_wsgi.hub.config_schema import MAX_PRICE
from murmur_wsgi.hub.context import MAX_TOKENS
from murmur_wsgi.settings import MAX_INT, MAX_SECS, Seconds, Size, StrictInt

from tests.conftest import Rpc, make_door
from tests.hub.conftest import HubClient, hub_config
from tests.sse_util import msg, open_stream

TOO_LONG = 1e12                 # seconds: ~31,700 years, past every wait of the platform
TOO_MANY = 10 ** 400


def _set(config: dict, path: tuple, value) -> dict:
    block = config
    for part in path[:-1]:
        block = block.setdefault(part, {})
    block[path[-1]] = value
    return config


# The hub's settings of each kind, found from its schema: a new one is covered at once.
HUB_SECONDS = [path for _, path, fld in env_settings() if isinstance(fld, Seconds)]
HUB_INTEGERS = [path for _, path, fld in env_settings() if isinstance(fld, (StrictInt, Size))
                and path[0] != "push"]


def test_the_hub_has_settings_of_each_kind():
    assert ("cancel_timeout_secs",) in HUB_SECONDS and ("limits", "run_timeout_secs") in HUB_SECONDS
    assert ("limits", "rate_per_minute") in HUB_INTEGERS


@pytest.mark.parametrize("path", HUB_SECONDS, ids=".".join)
def test_a_hub_duration_past_ten_years_is_refused_naming_its_key(path):
    with pytest.raises(ConfigError) as info:
        load_config(_set(hub_config(), path, TOO_LONG), environ={})
    assert str(info.value) == f"{'.'.join(path)}: must be at most {MAX_SECS} seconds (ten years)"


@pytest.mark.parametrize("path", HUB_INTEGERS, ids=".".join)
def test_a_hub_integer_past_64_bits_is_refused_naming_its_key(path):
    with pytest.raises(ConfigError) as info:
        load_config(_set(hub_config(), path, TOO_MANY), environ={})
    assert str(info.value).startswith(f"{'.'.join(path)}: must be at most {MAX_INT}")


def test_a_hub_at_the_largest_accepted_values_serves():
    config = hub_config(cancel_timeout_secs=MAX_SECS, drain_timeout_secs=MAX_SECS)
    config["limits"] = {"run_timeout_secs": MAX_SECS, "rate_per_minute": MAX_INT,
                        "concurrency": MAX_INT}
    hub = create_hub(config)
    try:
        client = HubClient(hub, agent="held")
        task = client.send("wait", configuration={"returnImmediately": True})
        canceled = client.result("CancelTask", {"id": task["id"]})
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        done = HubClient(hub).send("hello")
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        hub.close(drain_timeout=5)


@pytest.mark.parametrize("block, key", [
    ("stream", "heartbeat_secs"), ("stream", "write_timeout_secs"),
    ("tasks", "keep_finished_secs"), ("limits", "header_timeout_secs"),
    ("limits", "body_timeout_secs"), ("lifecycle", "input_timeout_secs")])
def test_a_door_duration_past_ten_years_is_refused_naming_its_key(block, key):
    with pytest.raises(ManifestError) as info:
        make_door(**{block: {key: TOO_LONG}})
    assert str(info.value) == f"{block}.{key}: must be at most {MAX_SECS} seconds (ten years)"


def test_a_harness_duration_past_ten_years_is_refused():
    with pytest.raises(ManifestError) as info:
        make_door(inference={"transport": "process"},
                  agent={"process": ["cat"], "idle_timeout_secs": TOO_LONG})
    assert str(info.value).startswith("agent.idle_timeout_secs: must be at most")


@pytest.mark.parametrize("value, error", [(2, "must be from 3 to 512 levels"),
                                           (513, "must be from 3 to 512 levels"),
                                           (True, "Not a valid integer."),
                                           (64.0, "Not a valid integer.")])
def test_a_harness_line_depth_out_of_its_range_is_refused(value, error):
    with pytest.raises(ManifestError) as info:
        make_door(inference={"transport": "process"},
                  agent={"process": ["cat"], "max_line_depth": value})
    assert str(info.value) == f"agent.max_line_depth: {error}"
    agent = make_door(inference={"transport": "process"},
                      agent={"process": ["cat"], "max_line_depth": 512}).session.agent
    assert agent.max_line_depth == 512


def test_a_door_at_the_longest_heartbeat_streams():
    rpc = Rpc(make_door(stream={"heartbeat_secs": MAX_SECS}))
    try:
        events = open_stream(rpc, "SendStreamingMessage", msg("/stream 2")).rest()
        assert events[-1].state == "TASK_STATE_COMPLETED"
    finally:
        rpc.door.close()


# --- pricing: micro-credits per million tokens, at most config_schema.MAX_PRICE -------
# Before its bound, a price of 1e30 was accepted and every run of its model that reported
# usage ended FAILED (decimal.InvalidOperation pricing it, logged as a traceback).

def most_tokens(ctx):
    """An agent reporting the most tokens a run may count, of the model priced "big"."""
    ctx.usage(input_tokens=MAX_TOKENS, output_tokens=MAX_TOKENS, cached_tokens=MAX_TOKENS,
              model="big")
    return "counted"


@pytest.mark.parametrize("key", ["input", "output", "cached"])
def test_a_price_past_the_bound_is_refused_naming_its_key(key):
    price = {"input": 1, "output": 1, key: 1e30}
    with pytest.raises(ConfigError) as info:
        load_config(hub_config(pricing={"big": price}), environ={})
    assert str(info.value).startswith(f"pricing.big.{key}: Must be greater than or equal to 0 "
                                      f"and less than or equal to {MAX_PRICE}")


def test_the_highest_price_of_the_most_tokens_is_charged():
    top = {"input": MAX_PRICE, "output": MAX_PRICE, "cached": MAX_PRICE}
    config = hub_config(pricing={"big": top})
    config["tenants"]["acme"]["agents"]["most"] = {
        "agent": "tests.shared.test_config_numbers:most_tokens", "publish": True}
    hub = create_hub(config)
    try:
        task = HubClient(hub, agent="most").send("count")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
        usage = task["artifacts"][0]["parts"][1]["data"]["usage"]
        # Cached tokens are part of the input: here all of it, at the cached price.
        assert usage["credits_micros"] == 2 * MAX_TOKENS * int(MAX_PRICE) // 1_000_000
        assert usage["pricing_status"] == "priced"
    finally:
        hub.close(drain_timeout=5)
