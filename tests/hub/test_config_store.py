"""Which store hub.yaml names: a Redis URL alone switches to Redis; contradictions exit 2."""
from __future__ import annotations

import pytest
import yaml

from murmur_wsgi.cli import main
from murmur_wsgi.hub.config import ConfigError, load_config

URL = "redis://127.0.0.1:6390/0"


@pytest.mark.parametrize("data, env", [
    ({}, {"MURMUR_HUB_REDIS_URL": URL}),
    ({"redis": {"url": URL}}, {}),
    ({"store": "redis"}, {"MURMUR_HUB_REDIS_URL": URL}),
    ({"store": URL}, {"MURMUR_HUB_REDIS_URL": URL}),
])
def test_a_redis_url_alone_switches_the_store(data, env):
    config = load_config(data, environ=env)
    assert config.shared and config.store_url() == URL


@pytest.mark.parametrize("data, env, line", [
    ({"store": "memory"}, {"MURMUR_HUB_REDIS_URL": URL},
     "store: memory contradicts MURMUR_HUB_REDIS_URL (redis.url), which names a Redis store: "
     "remove one of the two (a Redis URL alone serves on Redis)"),
    ({"store": "memory", "redis": {"url": URL}}, {},
     "store: memory contradicts redis.url, which names a Redis store: remove one of the two "
     "(a Redis URL alone serves on Redis)"),
    ({"redis": {"url": URL}}, {"MURMUR_HUB_STORE": "memory"},
     "MURMUR_HUB_STORE (store): memory contradicts redis.url, which names a Redis store: "
     "remove one of the two (a Redis URL alone serves on Redis)"),
    ({"store": "redis://other:6379/1"}, {"MURMUR_HUB_REDIS_URL": URL},
     "store: names another store than MURMUR_HUB_REDIS_URL (redis.url): keep one Redis URL "
     "(or write store: redis beside redis.url)"),
])
def test_contradicting_store_settings_name_both_keys(data, env, line):
    with pytest.raises(ConfigError) as info:
        load_config(data, environ=env)
    assert str(info.value) == line


def test_the_command_exits_2_naming_both(tmp_path, capsys, monkeypatch):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"store": "memory"}))
    monkeypatch.setenv("MURMUR_HUB_REDIS_URL", URL)
    assert main(["hub", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"murmur-wsgi: {path}: store: memory contradicts MURMUR_HUB_REDIS_URL "
                   "(redis.url), which names a Redis store: remove one of the two (a Redis "
                   "URL alone serves on Redis)\n")


def test_the_shipped_hub_yaml_switches_on_the_redis_url():
    with open("conf/hub.yaml", encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    assert "store" not in data
    assert load_config(data, environ={"MURMUR_HUB_REDIS_URL": URL}).shared
    assert not load_config(data, environ={}).shared


def test_more_workers_on_memory_say_what_to_set(tmp_path, capsys):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({}))
    assert main(["hub", "--config", str(path), "--workers", "2"]) == 2
    assert "set MURMUR_HUB_REDIS_URL=redis://host:port/0" in capsys.readouterr().err


def test_remove_digest_keeps_the_comments():
    from murmur_wsgi.hub.cli import add_digest, remove_digest

    a, b = "a" * 64, "b" * 64
    text = f"# top\ntenants:\n  acme:\n    api_keys:\n      - {a}   # first\n      - {b}\n"
    assert remove_digest(text, "acme", a) == f"# top\ntenants:\n  acme:\n    api_keys:\n" \
        f"      - {b}\n"
    only = remove_digest(f"tenants:\n  acme:\n    api_keys:\n      - {a}\n", "acme", a)
    assert yaml.safe_load(only) == {"tenants": {"acme": {"api_keys": []}}}
    assert remove_digest(add_digest(text, "acme", "c" * 64), "acme", "c" * 64) == text
