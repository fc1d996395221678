"""A store URL's TLS files (``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``) loaded as
hub.yaml loads, as each connection loads them: one that is no PEM certificate, or a key that
is not its certificate's, exits 2 naming ``store`` and the field, never the URL's password.

Before, each was only checked to be a file: the hub started, and every call answered -32603
(``SSLError`` in the log) in every TLS form.
"""
from __future__ import annotations

import pytest

from tests.tls_util import Authority

PASSWORD = "pw-never-logged-5c1e"
SCHEMES = ["rediss://127.0.0.1:1/0", "rediss-cluster://127.0.0.1:1",
           "rediss-sentinel://127.0.0.1:1/murmur/0"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A CA, the hub's certificate and key, another's key, and a file of garbage."""
    folder = tmp_path_factory.mktemp("tls-files")
    authority = Authority(folder, "files-ca")
    cert, key = authority.issue("hub")
    other_key = authority.issue("other")[1]
    garbage = folder / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n")
    return {"ca": authority.ca_file, "cert": cert, "key": key, "other_key": other_key,
            "garbage": str(garbage)}


def _exit_line(tmp_path, capsys, url: str) -> str:
    from murmur_wsgi.cli import main

    scheme, _, rest = url.partition("://")
    path = tmp_path / "hub.yaml"
    path.write_text(f"store: {scheme}://:{PASSWORD}@{rest}\ntenants:\n  t:\n    api_keys: []\n"
                    "    agents:\n      a: {agent: demo}\n")
    # NOTE: a --listen refused after the config: this never serves, whatever the file says.
    assert main(["hub", "--config", str(path), "--listen", "127.0.0.1:99999"]) == 2
    err = capsys.readouterr().err
    assert PASSWORD not in err
    prefix = f"murmur-wsgi: {path}: store: "
    assert err.startswith(prefix) and err.endswith("\n") and err.count("\n") == 1
    return err[len(prefix):-1]


@pytest.mark.parametrize("query, says", [
    ("ssl_ca_certs={garbage}", "the URL's ssl_ca_certs {garbage} holds no PEM certificate"),
    ("ssl_ca_certs={key}", "the URL's ssl_ca_certs {key} holds no PEM certificate"),
    ("ssl_ca_certs={ca}&ssl_certfile={garbage}&ssl_keyfile={key}",
     "the URL's ssl_certfile {garbage} holds no PEM certificate"),
    ("ssl_ca_certs={ca}&ssl_certfile={cert}&ssl_keyfile={other_key}",
     "the URL's ssl_keyfile {other_key} is not the unencrypted PEM key of the ssl_certfile "
     "{cert}"),
    ("ssl_ca_certs={ca}&ssl_certfile={cert}&ssl_keyfile={garbage}",
     "the URL's ssl_keyfile {garbage} is not the unencrypted PEM key of the ssl_certfile "
     "{cert}"),
    ("ssl_certfile={cert}", "the URL's ssl_certfile {cert} holds no unencrypted PEM key of "
                            "its certificate (name it in ssl_keyfile)"),
])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_tls_file_that_cannot_be_used_exits_2_naming_store_and_the_field(
        tmp_path, capsys, files, scheme, query, says):
    assert _exit_line(tmp_path, capsys, f"{scheme}?{query.format(**files)}") == \
        says.format(**files)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_usable_tls_files_load(tmp_path, capsys, files, scheme):
    """The CA, the certificate and its key load: the refusal is the --listen's, after them."""
    from murmur_wsgi.cli import main

    url = f"{scheme}?ssl_ca_certs={files['ca']}&ssl_certfile={files['cert']}" \
          f"&ssl_keyfile={files['key']}"
    path = tmp_path / "hub.yaml"
    path.write_text(f"store: {url}\ntenants:\n  t:\n    api_keys: []\n"
                    "    agents:\n      a: {agent: demo}\n")
    assert main(["hub", "--config", str(path), "--listen", "127.0.0.1:99999"]) == 2
    assert "store" not in capsys.readouterr().err
