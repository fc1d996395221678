"""hub.yaml's strings: text UTF-8 can encode, or exit 2 naming the key."""
from __future__ import annotations

import pytest
import yaml

from murmur_wsgi.cli import main
from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.config import ConfigError, load_config

from tests.hub.conftest import hub_config

# What YAML's "\ud800" reads as, and what Python makes of a variable's bytes that are not
# UTF-8 (os.environ decodes them with surrogateescape): a lone surrogate.
YAML_ESCAPE = yaml.safe_load('x: "a\\ud800b"')["x"]
ENV_BYTES = b"s\xff".decode("utf-8", "surrogateescape") * 40


def _with(path: tuple, value) -> dict:
    data = hub_config()
    block = data
    for key in path[:-1]:
        block = block.setdefault(key, {})
    block[path[-1]] = value
    return data


@pytest.mark.parametrize("path", [
    ("tenants", "acme", "agents", "echo", "description"),
    ("tenants", "acme", "agents", "echo", "version"),
    ("auth", "jwt", "issuer"),
    ("auth", "jwt", "audience"),
])
def test_a_lone_surrogate_in_hub_yaml_is_refused_naming_the_key(path):
    """NOTE: before, a description, version or skill of an agent holding one made the hub
    fail to start with a UnicodeEncodeError out of the card's encoding (a traceback, the
    gunicorn worker failing to boot), and one in auth.jwt made every JWT 401."""
    data = _with(path, YAML_ESCAPE)
    for make in (lambda: load_config(data, environ={}), lambda: create_hub(data)):
        with pytest.raises(ConfigError) as info:
            make()
        assert str(info.value).startswith(".".join(path) + ": holds a character"), \
            str(info.value)
        assert "\n" not in str(info.value)


def test_a_lone_surrogate_in_a_skill_or_a_key_is_refused_naming_it():
    data = hub_config()
    data["tenants"]["acme"]["agents"]["echo"]["skills"] = [
        {"id": "s", "name": "S", "description": YAML_ESCAPE}]
    with pytest.raises(ConfigError) as info:
        create_hub(data)
    assert str(info.value).startswith(
        "tenants.acme.agents.echo.skills[0].description: holds a character")
    data = hub_config()
    data["pricing"][YAML_ESCAPE] = {"input": 1, "output": 1}
    with pytest.raises(ConfigError) as info:
        load_config(data, environ={})
    assert str(info.value).startswith("pricing.a\\ud800b: holds a character")


def test_a_variable_whose_bytes_are_not_utf8_is_refused_naming_it():
    data = hub_config()
    with pytest.raises(ConfigError) as info:
        load_config(data, environ={"MURMUR_HUB_AUTH_JWT_SECRET": ENV_BYTES})
    assert str(info.value).startswith(
        "MURMUR_HUB_AUTH_JWT_SECRET (auth.jwt.secret): holds a character")
    assert "\udcff" not in str(info.value)


def test_the_push_secret_is_read_as_bytes_whatever_they_are():
    """push.secret is the one setting read as bytes (push/settings.py: ``secret_bytes``):
    a master secret made of random bytes works as before."""
    config = load_config(hub_config(), environ={"MURMUR_HUB_PUSH_ENABLED": "true",
                                                "MURMUR_HUB_PUSH_SECRET": ENV_BYTES})
    assert config.push["secret"] == ENV_BYTES


def test_the_hub_command_exits_2_with_one_line(tmp_path, capsys):
    data = hub_config()
    data["tenants"]["acme"]["agents"]["echo"]["description"] = YAML_ESCAPE
    path = tmp_path / "hub.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")     # written as "\ud800"
    assert main(["hub", "--config", str(path), "--dev", "--listen", "127.0.0.1:0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"murmur-wsgi: {path}: tenants.acme.agents.echo.description: "
                          "holds a character") and err.count("\n") == 1, err


def _renamed(block: dict, old: str, new: str) -> None:
    block[new] = block.pop(old)


@pytest.mark.parametrize("change, line", [
    # NOTE: before, each was read (the patterns ended with "$", which matches before a
    # final newline): a mount path announced in every card's URL with its newline, a
    # tenant or agent no request could name, a digest no key has (a YAML folded scalar,
    # "- >", ends with one), each silently.
    (lambda d: d.update(mount_path="/hub\n"), "mount_path: '/hub\\n' must be a path"),
    (lambda d: _renamed(d["tenants"], "acme", "acme\n"),
     "tenants.acme\\n: is not a tenant name"),
    (lambda d: _renamed(d["tenants"]["acme"]["agents"], "echo", "echo\n"),
     "tenants.acme.agents.echo\\n: is not an agent name"),
    (lambda d: d["tenants"]["acme"]["api_keys"].append("a" * 64 + "\n"),
     "tenants.acme.api_keys[2]: must be the SHA-256 hex digest"),
    (lambda d: d["tenants"]["acme"].update(admission="tests.hub.agents:refuse_beta\n"),
     'tenants.acme.admission: must be "pkg.module:callable"'),
])
def test_a_name_a_digest_or_a_path_ending_in_a_newline_is_refused(change, line):
    data = hub_config()
    change(data)
    with pytest.raises(ConfigError) as info:
        load_config(data, environ={})
    assert str(info.value).startswith(line), str(info.value)
