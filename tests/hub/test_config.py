"""hub.yaml: defaults, the environment, and bad values (exit 2, one line naming the key)."""
from __future__ import annotations

import logging
import os
import stat
import sys
import threading

import pytest
import yaml

from murmur_wsgi.cli import main
from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import ConfigError, load_config
from murmur_wsgi.hub.config_env import env_settings

from tests.hub.conftest import HubClient, hub_config, sha


def test_defaults():
    config = load_config({}, environ={})
    assert config.public_url is None and config.store == "memory"
    assert config.drain_timeout_secs == 20 and config.cancel_timeout_secs == 10
    assert config.limits == {"concurrency": 4, "rate_per_minute": 120, "run_timeout_secs": 300,
                             "max_subscriptions": 20, "max_body_bytes": 1024 ** 2,
                             "header_timeout_secs": 10, "body_timeout_secs": 30,
                             "max_id_bytes": 256, "max_json_values": 1_000_000,
                             "max_json_depth": 64, "max_parts": 1_000,
                             "data_text_bytes": 16 * 1024 ** 2,
                             "max_output_bytes": 64 * 1024 ** 2, "max_usage_models": 1_000,
                             "history_bytes": 4 * 1024 ** 2,
                             "list_bytes": 16 * 1024 ** 2,
                             "answer_bytes": 128 * 1024 ** 2,
                             "worker_answer_bytes": 256 * 1024 ** 2}
    assert config.events == {"retention_secs": 86400, "merge_secs": 0.25}
    assert config.stream == {"keepalive_secs": 15, "write_timeout_secs": 10,
                             "live_backlog_bytes": 8 * 1024 ** 2}
    assert config.push == {"enabled": False, "secret": None, "ports": [443],
                           "allow_networks": [], "ca_file": None, "retry_scale": 1.0}
    # The text's default and floor: the larger of 300 s and run timeout + 60 s.
    assert config.sweep_max_age_secs == 360


def test_sweep_floor_raised(caplog):
    with caplog.at_level(logging.WARNING):
        config = load_config({"sweep_max_age_secs": 10, "limits": {"run_timeout_secs": 600}},
                             environ={})
    assert config.sweep_max_age_secs == 660
    assert "raised" in caplog.text


def test_sweep_floor_is_the_longest_run_timeout_of_any_tenant(caplog):
    # NOTE: before, a tenant's own run timeout was left out: 300 s here, and the sweep
    # ended that tenant's runs 300 s in, 600 s before their run timeout.
    data = hub_config()
    data["tenants"]["acme"]["limits"] = {"run_timeout_secs": 900}
    assert load_config(data, environ={}).sweep_max_age_secs == 960
    data["sweep_max_age_secs"] = 400
    with caplog.at_level(logging.WARNING):
        assert load_config(data, environ={}).sweep_max_age_secs == 960
    assert "sweep_max_age_secs 400 is below the longest run_timeout_secs + 60 s; raised " \
           "to 960" in caplog.text


def test_tenant_limits_override_the_defaults():
    config = load_config(hub_config(), environ={})
    assert config.tenant_limits("globex")["concurrency"] == 1
    assert config.tenant_limits("globex")["run_timeout_secs"] == 30
    assert config.tenant_limits("acme")["concurrency"] == 4


def test_every_setting_has_its_variable():
    names = {name for name, _, _ in env_settings()}
    for expected in ("MURMUR_HUB_PUBLIC_URL", "MURMUR_HUB_STORE", "MURMUR_HUB_DRAIN_TIMEOUT_SECS",
                     "MURMUR_HUB_SWEEP_MAX_AGE_SECS", "MURMUR_HUB_LIMITS_RUN_TIMEOUT_SECS",
                     "MURMUR_HUB_LIMITS_MAX_SUBSCRIPTIONS", "MURMUR_HUB_EVENTS_RETENTION_SECS",
                     "MURMUR_HUB_AUTH_JWT_SECRET", "MURMUR_HUB_AUTH_JWT_ALGORITHMS",
                     "MURMUR_HUB_PUSH_ENABLED", "MURMUR_HUB_PUSH_SECRET", "MURMUR_HUB_PUSH_PORTS",
                     "MURMUR_HUB_TENANTS", "MURMUR_HUB_PRICING"):
        assert expected in names


def test_the_variable_wins():
    env = {"MURMUR_HUB_LIMITS_RUN_TIMEOUT_SECS": "60", "MURMUR_HUB_PUBLIC_URL": "https://x.io",
           "MURMUR_HUB_AUTH_JWT_ALGORITHMS": "HS256,HS512",
           "MURMUR_HUB_PRICING": '{"m": {"input": 1, "output": 2}}'}
    config = load_config(hub_config(), environ=env)
    assert config.limits["run_timeout_secs"] == 60
    assert config.public_url == "https://x.io"
    assert config.auth["jwt"]["algorithms"] == ["HS256", "HS512"]
    assert config.pricing == {"m": {"input": 1, "output": 2, "cached": None}}


@pytest.mark.parametrize("data, env, line", [
    pytest.param({"limits": {"concurrency": 0}}, {}, "limits.concurrency: Must be greater",
                 id="concurrency"),
    pytest.param({}, {"MURMUR_HUB_LIMITS_CONCURRENCY": "many"},
                 "MURMUR_HUB_LIMITS_CONCURRENCY (limits.concurrency): Not a valid integer",
                 id="env-concurrency"),
    pytest.param({"public_url": "ftp://x"}, {}, "public_url: 'ftp://x' must be", id="scheme"),
    pytest.param({"public_url": "https://x.io/a2a"}, {}, "public_url: 'https://x.io/a2a' must "
                 "be a host only", id="path"),
    pytest.param({"public_url": "https://x.io?q"}, {}, "public_url:", id="query"),
    pytest.param({"public_url": "https://u:p@x.io"}, {}, "public_url:", id="credentials"),
    pytest.param({}, {"MURMUR_HUB_PUBLIC_URL": "nope"}, "MURMUR_HUB_PUBLIC_URL (public_url):",
                 id="env-url"),
    pytest.param({"store": "postgres://localhost/0"}, {}, "store: must be memory, redis, or a "
                 "redis://", id="store"),
    pytest.param({"store": "redis://localhost:6379/x"}, {}, "store: a Redis URL's path is its "
                 "database number", id="store-db"),
    pytest.param({"store": "redis"}, {}, "store: redis needs redis.url", id="store-no-url"),
    pytest.param({}, {"MURMUR_HUB_REDIS_URL": "http://x"}, "MURMUR_HUB_REDIS_URL (redis.url): "
                 "must be memory, redis", id="redis-url-env"),
    pytest.param({"redis": {"liveness_secs": 0}}, {}, "redis.liveness_secs: Must be greater",
                 id="liveness"),
    pytest.param({"redis": {"max_connections": 1}}, {}, "redis.max_connections: Must be "
                 "greater than or equal to 2", id="max-connections"),
    pytest.param({"push": {"enabled": True}}, {}, "push.secret: is required", id="push"),
    pytest.param({"auth": {"jwt": {"issuer": "x"}}}, {}, "auth.jwt.secret: set exactly one",
                 id="jwt-key"),
    pytest.param({"auth": {"jwt": {"secret": "s", "algorithms": ["RS256"]}}}, {},
                 "auth.jwt.algorithms: 'RS256' does not verify with a secret", id="jwt-alg"),
    pytest.param({"auth": {"jwt": {"secret": "s", "algorithms": ["none"]}}}, {},
                 "auth.jwt.algorithms[0]: Must be one of", id="alg-none"),
    pytest.param({"tenants": {"t": {"api_keys": ["mhk_plain"]}}}, {},
                 "tenants.t.api_keys[0]: must be the SHA-256 hex digest", id="plain-key"),
    pytest.param({"tenants": {"t": {"agents": {"a": {"agent": "nope"}}}}}, {},
                 "tenants.t.agents.a.agent: must be demo", id="agent"),
    pytest.param({"tenants": {"t": {"admission": "not a callable"}}}, {},
                 "tenants.t.admission: must be", id="admission"),
    pytest.param({"pricing": {"m": {"input": -1, "output": 1}}}, {},
                 "pricing.m.input: Must be greater than or equal to 0", id="price"),
    pytest.param({"limits": {"run_timeout": 5}}, {}, "limits.run_timeout: is not a key this "
                 "hub reads", id="unknown"),
    pytest.param({"tenants": {"a": {"api_keys": [sha("k")]}, "b": {"api_keys": [sha("k")]}}},
                 {}, "tenants.b.api_keys: a key of tenant a cannot belong to b too",
                 id="shared-key"),
])
def test_bad_values_name_the_key(data, env, line):
    with pytest.raises(ConfigError) as info:
        load_config(data, environ=env)
    assert str(info.value).startswith(line), str(info.value)
    assert "\n" not in str(info.value)


NOT_A_HOST = "must name a host (letters, digits, -, _ and .) or an IP address, and a port " \
    "from 1 to 65535"


@pytest.mark.parametrize("url, line", [
    # NOTE: before, each was accepted and announced in every card as it was (a card URL
    # "https://exa mple.com/a2a/v1/agents/echo", one with a newline, one with "<script>").
    *[(url, "public_url: must not hold spaces or control characters") for url in (
        " https://x.io", "https://x.io ", "https://x.io\n", "https://x.io\t",
        "https://exa mple.com", "https://x.io\x00")],
    *[(url, f"public_url: '{url}' {NOT_A_HOST}") for url in (
        "https://<script>", "https://x.io;p", "https://*.x.io", "https://x.io,y.io",
        "https://ex%61mple.com", "https://x..io", "https://-x.io", "https://x.io\\evil",
        "https://x.io:", "https://x.io:0")],
])
def test_a_public_url_that_is_not_a_url_exits_at_boot(url, line):
    """The text: an invalid NEXUS_PUBLIC_URL stops the process at boot."""
    for data, env, named in (({"public_url": url}, {}, line),
                             ({}, {"MURMUR_HUB_PUBLIC_URL": url}, line.replace(
                                 "public_url:", "MURMUR_HUB_PUBLIC_URL (public_url):", 1))):
        with pytest.raises(ConfigError) as info:
            load_config(data, environ=env)
        assert str(info.value) == named


@pytest.mark.parametrize("url", ["http://localhost:41880", "http://127.0.0.1:41881",
                                 "https://agents.example.com", "https://agents.example.com/",
                                 "https://[2001:db8::1]:8443", "http://murmur-hub:8080",
                                 "https://b\u00fccher.example", "https://x.io:65535",
                                 "http://murmur_hub:41880"])
def test_a_public_url_of_a_host_is_read(url):
    assert load_config({"public_url": url}, environ={}).public_url == url.rstrip("/")


def test_cli_bad_config_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"limits": {"rate_per_minute": "fast"}}))
    assert main(["hub", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"murmur-wsgi: {path}: limits.rate_per_minute: Not a valid integer.\n"


def test_cli_unloadable_agent_exits_2(tmp_path, capsys):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"tenants": {"t": {"agents": {
        "a": {"agent": "no_such_module_here:agent"}}}}}))
    assert main(["hub", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("murmur-wsgi: tenants.t.agents.a.agent: cannot import "
                          "no_such_module_here") and err.count("\n") == 1


def test_cli_hook_that_does_not_load_exits_2(tmp_path, capsys):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"tenants": {"t": {"admission": "tests.hub.agents:nothing"}}}))
    assert main(["hub", "--config", str(path)]) == 2
    assert capsys.readouterr().err == ("murmur-wsgi: tenants.t.admission: tests.hub.agents has "
                                       "no nothing\n")


def test_cli_key_mints_and_records_a_digest(tmp_path, capsys):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"public_url": "https://h.io", "tenants": {
        "t": {"agents": {"a": {"agent": "demo", "publish": True}}}}}))
    assert main(["hub", "key", "t", "--config", str(path)]) == 0
    key = capsys.readouterr().out.strip()
    assert key.startswith("mhk_") and len(key) > 40
    data = yaml.safe_load(path.read_text())
    assert data["tenants"]["t"]["api_keys"] == [sha(key)]
    assert key not in path.read_text()
    client = HubClient(create_hub(str(path)), "a", {"X-API-Key": key})
    assert client.card().status_code == 200
    assert main(["hub", "key", "nobody", "--config", str(path)]) == 2


def test_keys_minted_at_once_are_all_recorded(tmp_path, capsys):
    # NOTE: before, each mint read hub.yaml, then replaced it: two at once, the second's
    # file lost the first's digest, and both printed their keys (8 of 10 kept, once).
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"public_url": "https://h.io", "tenants": {
        "t": {"agents": {"a": {"agent": "demo", "publish": True}}}}}))
    start = threading.Barrier(8)
    codes = []

    def mint():
        start.wait(10)
        codes.append(main(["hub", "key", "t", "--config", str(path)]))
    threads = [threading.Thread(target=mint) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    keys = capsys.readouterr().out.split()
    assert codes == [0] * 8 and len(keys) == 8
    recorded = yaml.safe_load(path.read_text())["tenants"]["t"]["api_keys"]
    assert sorted(recorded) == sorted(sha(key) for key in keys)


def test_a_hub_yaml_that_cannot_be_replaced_is_one_line(tmp_path, capsys, monkeypatch):
    path = tmp_path / "hub.yaml"
    text = yaml.safe_dump({"tenants": {"t": {"agents": {"a": {"agent": "demo"}}}}})
    path.write_text(text)

    def refused(*args):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "replace", refused)         # an immutable file, a read-only mount
    assert main(["hub", "key", "t", "--config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""                                    # no key printed: none recorded
    assert err == f"murmur-wsgi: {path}: cannot be changed: Operation not permitted\n"
    assert path.read_text() == text and os.listdir(tmp_path) == ["hub.yaml"]


def test_a_key_minted_through_a_link_to_hub_yaml_changes_the_real_file(tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    path = real / "hub.yaml"
    path.write_text(yaml.safe_dump({"tenants": {"t": {"agents": {"a": {"agent": "demo"}}}}}))
    link = tmp_path / "hub.yaml"
    link.symlink_to(path)
    assert main(["hub", "key", "t", "--config", str(link)]) == 0
    key = capsys.readouterr().out.strip()
    assert link.is_symlink()                                # before: replaced by a file
    assert yaml.safe_load(path.read_text())["tenants"]["t"]["api_keys"] == [sha(key)]


def test_a_key_that_cannot_be_printed_says_so_and_how_to_revoke_it(tmp_path, capsys,
                                                                    monkeypatch):
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"tenants": {"t": {"agents": {"a": {"agent": "demo"}}}}}))

    class Closed:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass
    monkeypatch.setattr(sys, "stdout", Closed())            # `hub key t | true`
    assert main(["hub", "key", "t", "--config", str(path)]) == 2
    digest = yaml.safe_load(path.read_text())["tenants"]["t"]["api_keys"][0]
    assert capsys.readouterr().err == (
        f"murmur-wsgi: the new key of tenant t is recorded but could not be printed "
        f"(Broken pipe): revoke it with --revoke {digest[:12]}\n")


def test_a_folder_that_cannot_be_locked_is_changed_with_a_warning(tmp_path, capsys,
                                                                   monkeypatch):
    import errno
    import fcntl

    def no_lock(fd, how):
        raise OSError(errno.EBADF, "Bad file descriptor")  # NFS: no flock on a folder
    monkeypatch.setattr(fcntl, "flock", no_lock)
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"tenants": {"t": {"agents": {"a": {"agent": "demo"}}}}}))
    assert main(["hub", "key", "t", "--config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert sha(out.strip()) in yaml.safe_load(path.read_text())["tenants"]["t"]["api_keys"]
    assert err == (f"murmur-wsgi: warning: {path}: its folder cannot be locked (Bad file "
                   "descriptor); another hub key command at once may undo this one\n")


def test_empty_public_url_answers_404_everywhere_and_warns(caplog):
    with caplog.at_level(logging.WARNING):
        hub = create_hub(hub_config(public_url=""))
    assert "public_url is empty" in caplog.text
    client = HubClient(hub)
    for response in (client.card(), client.call("GetTask", {"id": "x"}),
                     client.client.get("/a2a/v1/anything")):
        assert response.status_code == 404
        assert response.get_json() == {"error": "not found"}
        assert response.headers["Cache-Control"] == "private, no-store"
    hub.close(0)


@pytest.mark.parametrize("text", [
    "# top\ntenants:\n  t:\n    # the keys\n    api_keys:\n      - " + "a" * 64 + "  # old\n"
    "    agents: {a: {agent: demo, publish: true}}\n",
    "tenants:\n  t:\n    api_keys: []   # none yet\n    agents:\n      a: {agent: demo}\n",
    "tenants:\n  t:\n    agents:\n      a: {agent: demo}   # keep me\n",
    "tenants: {t: {agents: {a: {agent: demo}}}}\n",
])
def test_key_keeps_the_file_as_written(tmp_path, capsys, text):
    path = tmp_path / "hub.yaml"
    path.write_text(text)
    assert main(["hub", "key", "t", "--config", str(path)]) == 0
    key = capsys.readouterr().out.strip()
    written = path.read_text()
    assert sha(key) in yaml.safe_load(written)["tenants"]["t"]["api_keys"]
    for comment in ("# top", "# the keys", "# old", "# none yet", "# keep me"):
        assert (comment in text) == (comment in written)
    assert key not in written


@pytest.mark.parametrize("mode", [0o600, 0o640])
def test_key_keeps_the_files_mode(tmp_path, capsys, mode):
    """hub.yaml holds auth.jwt.secret: a file the operator closed to others stays closed
    after ``hub key`` rewrites it (mint and revoke), whatever the umask; no staged file stays."""
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"auth": {"jwt": {"secret": "s" * 40}}, "tenants": {
        "t": {"agents": {"a": {"agent": "demo"}}}}}))
    path.chmod(mode)
    old = os.umask(0o022)
    try:
        assert main(["hub", "key", "t", "--config", str(path)]) == 0
        assert stat.S_IMODE(path.stat().st_mode) == mode
        key = capsys.readouterr().out.strip()
        assert main(["hub", "key", "t", "--config", str(path), "--revoke", sha(key)]) == 0
        assert stat.S_IMODE(path.stat().st_mode) == mode
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hub.yaml"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="giving a file another owner takes root")
def test_key_keeps_the_files_owner_and_group(tmp_path, capsys):
    """A hub.yaml of another owner and group (root:murmur 0640, the hub reading it through
    its group) keeps both after ``hub key`` rewrites it as root."""
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({"auth": {"jwt": {"secret": "s" * 40}}, "tenants": {
        "t": {"agents": {"a": {"agent": "demo"}}}}}))
    path.chmod(0o640)
    os.chown(path, 12345, 23456)
    assert main(["hub", "key", "t", "--config", str(path)]) == 0
    key = capsys.readouterr().out.strip()
    assert (path.stat().st_uid, path.stat().st_gid) == (12345, 23456)
    assert main(["hub", "key", "t", "--config", str(path), "--revoke", sha(key)]) == 0
    assert (path.stat().st_uid, path.stat().st_gid) == (12345, 23456)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.parametrize("env", [False, True], ids=["file", "variable"])
def test_a_public_url_with_a_password_is_refused_without_echoing_it(capsys, tmp_path, env,
                                                                    monkeypatch):
    """The refusal names the key and the rule, never the URL's password (it goes to a
    terminal or a CI log)."""
    url = "https://admin:s3cret-pass@hub.example.com"
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump({} if env else {"public_url": url}))
    if env:
        monkeypatch.setenv("MURMUR_HUB_PUBLIC_URL", url)
    assert main(["hub", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "public_url" in err and "must not carry credentials" in err
    assert "s3cret-pass" not in err and err.count("\n") == 1
