"""A hub on a Redis that asks for TLS, a password or an ACL user, as production runs one.

Each server is real: TLS only (``--port 0 --tls-port P``, a certificate of a CA the test
makes), ``--requirepass``, an ACL user (``--user hub on >… ~* &* +@all``, the default user
off). Every store URL form with its credentials answers; a wrong CA, no client certificate
where one is required, or a wrong password answers -32603 (never an unverified
connection), and neither a log line nor an answer holds the password.
"""
from __future__ import annotations

import pytest

from murmur_wsgi.hub import create_hub

from tests.hub.conftest import FAST, HubClient, close_hub, hub_config
from tests.redis_util import RedisServer
from tests.tls_util import Authority

PASSWORD = "pw-never-logged-7f3a"
UNAVAILABLE = {"code": -32603, "message": "Internal error: the hub's task store is "
                                          "unavailable; try again shortly"}


def _served(url: str) -> None:
    """A blocking send on a hub of ``url`` completes, and GetTask reads it back."""
    hub = create_hub(hub_config(store=url, redis=dict(FAST)))
    try:
        rpc = HubClient(hub)
        task = rpc.send("hello over a secured Redis")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert rpc.result("GetTask", {"id": task["id"]})["id"] == task["id"]
    finally:
        close_hub(hub)


def _refused(url: str, caplog) -> None:
    """Every call of a hub of ``url`` answers -32603; no log line holds the password."""
    hub = create_hub(hub_config(store=url, redis=dict(FAST)))
    try:
        rpc = HubClient(hub)
        answer = rpc.call("SendMessage", {"message": {"messageId": "m-refused", "role":
                                                      "ROLE_USER", "parts": [{"text": "hi"}]}})
        assert answer.status_code == 200 and answer.get_json()["error"] == UNAVAILABLE
        assert PASSWORD not in answer.get_data(as_text=True)
        assert rpc.error("GetTask", {"id": "t-refused"}) == UNAVAILABLE
    finally:
        close_hub(hub)
    assert caplog.text and PASSWORD not in caplog.text


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    return Authority(tmp_path_factory.mktemp("tls"), "redis-ca")


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, authority):
    server = RedisServer(tmp_path_factory.mktemp("redis-tls"), tls=authority,
                         extra=("--requirepass", PASSWORD), auth={"password": PASSWORD}).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis-acl"),
                         extra=("--user", "default", "off",
                                "--user", "hub", "on", f">{PASSWORD}", "~*", "&*", "+@all"),
                         auth={"username": "hub", "password": PASSWORD}).start()
    yield server
    server.stop()


def _with(url: str, query: str) -> str:
    return url + ("&" if "?" in url else "?") + query


def _secret(url: str, userinfo: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{userinfo}@{rest}"


def test_rediss_verifies_the_server_against_the_operators_ca(tls_server, authority):
    _served(_with(_secret(tls_server.tls_url, f":{PASSWORD}"),
                  f"ssl_ca_certs={authority.ca_file}"))


@pytest.mark.parametrize("trust", ["another", "the system's"])
def test_rediss_to_a_server_its_ca_does_not_sign_answers_32603(tls_server, tmp_path, trust,
                                                               caplog):
    url = _secret(tls_server.tls_url, f":{PASSWORD}")
    if trust == "another":
        url = _with(url, f"ssl_ca_certs={Authority(tmp_path, 'other-ca').ca_file}")
    _refused(url, caplog)


def test_rediss_with_a_wrong_password_answers_32603(tls_server, authority, caplog):
    url = _with(f"rediss://:wrong-{PASSWORD}@127.0.0.1:{tls_server.port}/0",
                f"ssl_ca_certs={authority.ca_file}")
    _refused(url, caplog)


def test_mutual_tls_presents_the_operators_client_certificate(tmp_path, authority, caplog):
    cert, key = authority.issue("hub")
    server = RedisServer(tmp_path / "mtls", tls=authority, extra=("--tls-auth-clients", "yes"),
                         auth={"ssl_certfile": cert, "ssl_keyfile": key}).start()
    try:
        url = _with(server.tls_url, f"ssl_ca_certs={authority.ca_file}")
        _served(_with(url, f"ssl_certfile={cert}&ssl_keyfile={key}"))
        _refused(_with(url, f"password={PASSWORD}"), caplog)   # no certificate: refused
    finally:
        server.stop()


@pytest.mark.parametrize("form", ["tcp", "unix"])
def test_an_acl_user_logs_in_by_each_url_form(acl_server, form):
    acl_server.flush()
    if form == "tcp":
        _served(_secret(acl_server.url, f"hub:{PASSWORD}"))
    else:
        _served(_with(acl_server.unix_url, f"username=hub&password={PASSWORD}"))


@pytest.mark.parametrize("form", ["tcp", "unix", "no user"])
def test_an_acl_user_with_a_wrong_password_answers_32603(acl_server, form, caplog):
    if form == "tcp":
        url = _secret(acl_server.url, f"hub:wrong-{PASSWORD}")
    elif form == "unix":
        url = _with(acl_server.unix_url, f"username=hub&password=wrong-{PASSWORD}")
    else:                                       # the default user, which is off
        url = _secret(acl_server.url, f":{PASSWORD}")
    _refused(url, caplog)


@pytest.mark.parametrize("url, says", [
    ("redis://h:6379/0?ssl_ca_certs=/etc/ca.pem", "rediss:// for TLS"),
    ("rediss://h:6379/0?ssl_ca_cert=/etc/ca.pem", "takes db, username, password, ssl_ca_certs"),
    ("rediss://h:6379/0?ssl_cert_reqs=none", "takes db, username, password, ssl_ca_certs"),
    ("redis://h:6379/0?socket_timeout=0", "takes db, username, password only"),
    ("rediss://h:6379/0?ssl_ca_certs=/a&ssl_ca_certs=/b", "each once"),
    # redis-py drops what follows a #: the password cut short, a field unread.
    ("redis://h:6379/0?password=ab#cd", "holds no #"),
    ("rediss://h:6379/0?ssl_ca_certs=/etc/ca.pem#x", "holds no #"),
    # redis-py's int() of it would raise ValueError as the hub starts: a traceback.
    ("redis://h:6379/0?db=abc", "db is its database number"),
    ("rediss://h:6379?db=%C2%B2", "db is its database number"),
])
def test_a_query_redis_py_would_misread_is_refused_naming_the_key(url, says):
    from murmur_wsgi.hub.config_schema import ConfigError

    secret = _secret(url, f":{PASSWORD}")
    with pytest.raises(ConfigError) as refused:
        create_hub(hub_config(store=secret))
    assert str(refused.value).startswith("store: ") and says in str(refused.value)
    assert PASSWORD not in str(refused.value)


@pytest.mark.parametrize("url, public", [
    ("redis://h:6379/0?pass%77ord=SECRET", "redis://h:6379/0?pass%77ord=***"),
    ("unix:///run/redis.sock?db=0&%70assword=SECRET&username=u",
     "unix:///run/redis.sock?db=0&%70assword=***&username=u"),
    ("redis-sentinel://h:1/m/0?sentinel%5Fpassword=SECRET&sentinel_username=w",
     "redis-sentinel://h:1/m/0?sentinel%5Fpassword=***&sentinel_username=w"),
    ("rediss://h:6379/0?ssl_ca_certs=/ca.pem&password=SEC#RET",
     "rediss://h:6379/0?ssl_ca_certs=/ca.pem&password=***"),
])
def test_the_logged_url_masks_a_password_however_its_field_is_spelled(url, public):
    """redis-py reads a query field's name percent-decoded: ``pass%77ord=`` is a password."""
    from murmur_wsgi.hub.store.redis_client import public_url

    assert public_url(url) == public


@pytest.mark.parametrize("query, missing", [
    ("ssl_ca_certs={gone}", "ssl_ca_certs"),
    ("ssl_ca_certs={ca}&ssl_certfile={gone}&ssl_keyfile={ca}", "ssl_certfile"),
    ("ssl_ca_certs={ca}&ssl_certfile={ca}&ssl_keyfile={folder}", "ssl_keyfile"),
])
@pytest.mark.parametrize("scheme", ["rediss://127.0.0.1:1/0", "rediss-cluster://127.0.0.1:1",
                                    "rediss-sentinel://127.0.0.1:1/murmur/0"])
def test_a_missing_tls_file_exits_2_naming_store_and_the_file(tmp_path, capsys, authority,
                                                              scheme, query, missing):
    from murmur_wsgi.cli import main

    named = {"gone": str(tmp_path / "gone.pem"), "ca": authority.ca_file,
             "folder": str(tmp_path)}
    url = _secret(f"{scheme}?{query.format(**named)}", f":{PASSWORD}")
    path = tmp_path / "hub.yaml"
    path.write_text(f"store: {url}\ntenants:\n  t:\n    api_keys: []\n"
                    "    agents:\n      a: {agent: demo}\n")
    # NOTE: a --listen refused after the config: this never serves, whatever the file says.
    assert main(["hub", "--config", str(path), "--listen", "127.0.0.1:99999"]) == 2
    err = capsys.readouterr().err
    file = named["folder" if missing == "ssl_keyfile" else "gone"]
    assert err == f"murmur-wsgi: {path}: store: the URL's {missing} {file} is not a file\n"
    assert PASSWORD not in err


@pytest.mark.parametrize("scheme", ["rediss://127.0.0.1:1/0", "rediss-cluster://127.0.0.1:1",
                                    "rediss-sentinel://127.0.0.1:1/murmur/0"])
def test_a_key_without_its_certificate_exits_2_naming_store(tmp_path, capsys, authority,
                                                           scheme):
    """``ssl_keyfile`` alone: every connection's TLS raised ``TypeError`` (rediss:// and
    rediss-sentinel://: the hub's start a traceback; rediss-cluster://: each call -32603)."""
    from murmur_wsgi.cli import main

    url = _secret(f"{scheme}?ssl_ca_certs={authority.ca_file}&ssl_keyfile={authority.ca_file}",
                  f":{PASSWORD}")
    path = tmp_path / "hub.yaml"
    path.write_text(f"store: {url}\ntenants:\n  t:\n    api_keys: []\n"
                    "    agents:\n      a: {agent: demo}\n")
    assert main(["hub", "--config", str(path), "--listen", "127.0.0.1:99999"]) == 2
    assert capsys.readouterr().err == (
        f"murmur-wsgi: {path}: store: the URL's ssl_keyfile is the key of its ssl_certfile "
        f"(the hub's certificate for mutual TLS), which it lacks\n")


@pytest.mark.parametrize("url, field", [
    ("redis://:@127.0.0.1:6379/0", "password (between ':' and '@')"),
    ("rediss://hub:@127.0.0.1:6379/0", "password (between ':' and '@')"),
    ("redis://127.0.0.1:6379/0?password=", "password"),
    ("unix:///run/redis.sock?db=0&password=", "password"),
    ("unix:///run/redis.sock?username=&password=x", "username"),
    ("redis-sentinel://:@127.0.0.1:26379/murmur/0", "password (between ':' and '@')"),
    ("redis-sentinel://127.0.0.1:26379/murmur/0?sentinel_password=", "sentinel_password"),
    ("redis-sentinel://127.0.0.1:26379/murmur/0?sentinel_username=&sentinel_password=s",
     "sentinel_username"),
    ("rediss-sentinel://:@127.0.0.1:26379/murmur/0?ssl_ca_certs=/ca.pem",
     "password (between ':' and '@')"),
    ("rediss-sentinel://127.0.0.1:26379/murmur/0?sentinel_password=", "sentinel_password"),
    ("redis-cluster://:@127.0.0.1:7000", "password (between ':' and '@')"),
])
def test_an_empty_password_is_refused_in_every_url_form(url, field):
    """Each form read an empty one as none (Redis asked without a password: most often a
    variable left unset), but ``redis://…?password=``, refused as a malformed query."""
    from murmur_wsgi.hub.config_schema import ConfigError

    with pytest.raises(ConfigError) as refused:
        create_hub(hub_config(store=url))
    assert str(refused.value).startswith(f"store: the URL's {field} is empty, which reads "
                                         "as none: give it, or leave out ")


@pytest.mark.parametrize("url, field", [
    ("redis://127.0.0.1:6379/0?password=pa+ss", "password"),
    ("rediss://127.0.0.1:6379/0?username=hub&password=pa+ss", "password"),
    ("unix:///run/redis/redis.sock?db=0&username=h+ub", "username"),
    ("redis-sentinel://127.0.0.1:26379/murmur/0?sentinel_password=s+s", "sentinel_password"),
    ("rediss-sentinel://127.0.0.1:26379/murmur/0?sentinel_password=s+s", "sentinel_password"),
])
def test_a_plus_in_a_query_credential_says_to_percent_encode_it(url, field):
    """A URL's query reads '+' as a space (redis-py's parsing and the hub's alike): the hub
    logged in with another password than the one written."""
    from murmur_wsgi.hub.config_schema import ConfigError

    with pytest.raises(ConfigError) as refused:
        create_hub(hub_config(store=url))
    assert str(refused.value) == (f"store: the URL's {field} holds a '+', which a URL's query "
                                  "reads as a space: percent-encode it as %2B")


@pytest.mark.parametrize("url", [
    "redis-sentinel://:pa?ss@127.0.0.1:26379/murmur/0",
    "redis-sentinel://hub:pa?ss/x@127.0.0.1:26379,127.0.0.1:26380/murmur/0?sentinel_password=s",
    "redis-cluster://:pa?ss@127.0.0.1:7000",
    "rediss://hub:pa?ss@127.0.0.1:6379/0",
    "rediss-sentinel://:pa?ss@127.0.0.1:26379/murmur/0?ssl_ca_certs=/ca.pem",
])
def test_a_literal_question_mark_in_a_password_says_to_percent_encode_it(url):
    """The URL's first '?' starts its query: before, the sentinel URL was refused as naming
    no service, the others as not a URL of their kind."""
    assert _refusal(url) == ("store: the URL's password holds a '?', where the URL's query "
                             "starts: percent-encode it as %3F (and '#' as %23, '@' as %40, "
                             "'/' as %2F)")


def _refusal(url: str) -> str:
    """The one line a hub of ``url`` is refused with."""
    from murmur_wsgi.hub.config_schema import ConfigError

    with pytest.raises(ConfigError) as refused:
        create_hub(hub_config(store=url))
    return str(refused.value)


@pytest.mark.parametrize("url", [
    "redis-sentinel://127.0.0.1:26379/murmur/0?sentinel_password=a@b?c",
    "unix:///run/redis.sock?password=a?b@c",
])
def test_a_question_mark_or_at_sign_in_a_query_password_is_read(url):
    """After the query's start, a '?' or '@' is the value's own: no hint, no refusal."""
    from murmur_wsgi.hub.config import load_config

    assert load_config(hub_config(store=url), environ={}).store == url


HASHED = "pw#never-logged"


@pytest.mark.parametrize("url", [
    f"redis://:{HASHED}@127.0.0.1:6379/0",
    f"rediss://hub:{HASHED}@127.0.0.1:6379/0",
    f"redis://127.0.0.1:6379/0?password={HASHED}",
    f"unix:///run/redis.sock?password={HASHED}",
    f"redis-cluster://:{HASHED}@127.0.0.1:7000",
    "redis-cluster://127.0.0.1:7000#never-logged",
    "rediss-cluster://127.0.0.1:7000?ssl_ca_certs=/ca.pem#never-logged",
    f"redis-sentinel://:{HASHED}@127.0.0.1:26379/murmur/0",
    "redis-sentinel://127.0.0.1:26379/mur#never-logged/0",
    f"redis-sentinel://127.0.0.1:26379/murmur/0?sentinel_password={HASHED}",
    f"rediss-sentinel://hub:{HASHED}@127.0.0.1:26379/murmur/0?ssl_ca_certs=/ca.pem",
])
def test_a_literal_hash_says_to_percent_encode_it_in_every_url_form(url):
    """A '#' starts a URL's fragment: redis-py (redis://, rediss://, unix://) drops what
    follows it, where the cluster's and the sentinels' forms read it as the password's or
    the service's: one rule for all. Before, a cluster's or a sentinel URL's password, a
    service's name and a cluster URL's trailing '#…' were taken, and a password's '#' in
    redis:// was refused as not a redis:// URL."""
    assert _refusal(url) == ("store: a Redis URL holds no #, which starts a URL's fragment: "
                             "in a password, a service's name or a query's value, write it "
                             "%23")


@pytest.mark.parametrize("url, read", [
    ("redis://:pw%23x@127.0.0.1:6379/0", "password"),
    ("rediss://hub:pw%23x@127.0.0.1:6379/0", "password"),
    ("redis://127.0.0.1:6379/0?password=pw%23x", "password"),
    ("unix:///run/redis.sock?password=pw%23x", "password"),
    ("redis-cluster://:pw%23x@127.0.0.1:7000", "password"),
    ("redis-sentinel://:pw%23x@127.0.0.1:26379/murmur/0", "password"),
    ("redis-sentinel://127.0.0.1:26379/pw%23x/0", "service"),
    ("redis-sentinel://127.0.0.1:26379/murmur/0?sentinel_password=pw%23x",
     "sentinel_password"),
])
def test_a_percent_encoded_hash_is_read_as_a_hash_in_every_url_form(url, read):
    from redis.connection import parse_url

    from murmur_wsgi.hub.config import load_config
    from murmur_wsgi.hub.store import sentinel_url
    from murmur_wsgi.hub.store.cluster_url import cluster_nodes

    assert load_config(hub_config(store=url), environ={}).store == url
    if sentinel_url.is_sentinel(url):
        assert getattr(sentinel_url.parse(url), read) == "pw#x"
    elif url.startswith("redis-cluster"):
        assert cluster_nodes(url)[2] == "pw#x"
    else:
        assert parse_url(url)[read] == "pw#x"
