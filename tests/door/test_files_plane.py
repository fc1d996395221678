"""The operator plane: /resources/files, declared by exports.files, read-only and contained."""
from __future__ import annotations

import errno
import hashlib
import json
import os

import pytest
from werkzeug.test import Client

from murmur_wsgi import create_app
from murmur_wsgi.door.manifest import ManifestError
from murmur_wsgi.door.planes import files as files_mod
from murmur_wsgi.door.tasks.record import COMPLETED, TaskRecord

MTIME_NS = 1_787_577_327_015_000_000
MTIME_MS = "1787577327015"
AUTH = {"scheme": "bearer", "credentials": {
    "reader": {"scopes": ["resources/files"]},
    "watcher": {"scopes": ["GetTask"]},
}}


def _compact(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wire(response):
    return response.status, list(response.headers.items()), response.get_data()


def refusal(status, code, message, extra=()):
    body = _compact({"error": code, "message": message})
    return (status, [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                     *extra], body)


OUTSIDE = refusal("403 Forbidden", "outside_root", "the path leaves the export root")
SYMLINK = refusal("403 Forbidden", "symlink_refused",
                  "the path passes through a symlink, which this plane does not follow")
NOT_REGULAR = refusal("403 Forbidden", "not_a_regular_file",
                      "the path names a directory, fifo, socket or device, not a file")
NOT_FOUND = refusal("404 Not Found", "not_found",
                    "nothing under the export root answers to this path")
TOO_LARGE = refusal("413 Content Too Large", "too_large",
                    "the file is larger than exports.files.max_bytes")
NOT_ALLOWED = refusal("405 Method Not Allowed", "method_not_allowed",
                      "the operator plane is read-only: it answers GET only", [("Allow", "GET")])
NO_PLANE = refusal("404 Not Found", "no_resource_plane", "this capsule declares no operator plane")
IO_ERROR = refusal("500 Internal Server Error", "io_error", "the file could not be read")


def write(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, ns=(MTIME_NS, MTIME_NS))


def door_for(workdir, root="out/", max_bytes=None, **manifest):
    files = {"root": root, "mode": "read-only"}
    if max_bytes is not None:
        files["max_bytes"] = max_bytes
    return create_app({"name": "test-agent", "version": "0.1.0",
                       "exports": {"files": files}, **manifest}, workdir=str(workdir))


@pytest.fixture
def tree(tmp_path):
    """out/ with files, a nested directory, symlinks in and out, a fifo and an empty dir."""
    out = tmp_path / "out"
    write(out / "report.md", b"# report\n")
    write(out / "b.txt", b"bee")
    write(out / "sub" / "deep" / "z.bin", b"\x00\x01\x02")
    write(out / "sub" / "a.txt", b"a")
    write(out / "big.bin", b"x" * 64)
    (out / "empty").mkdir()
    write(tmp_path / "secret.txt", b"secret")
    os.symlink("../secret.txt", out / "escape.txt")
    os.symlink("report.md", out / "inside-link.md")
    os.symlink("sub", out / "sublink")
    os.symlink(str(tmp_path), out / "rootlink")
    os.mkfifo(out / "fifo")
    return tmp_path


@pytest.fixture
def client(tree):
    return Client(door_for(tree, max_bytes=32))


# --- the listing -------------------------------------------------------------------------


def entry(path, data):
    return {"path": path, "size_bytes": len(data), "mtime_ms": int(MTIME_MS), "sha256": sha(data)}


def test_listing_is_recursive_sorted_and_regular_files_only(client):
    response = client.get("/resources/files")
    body = _compact({"root": "out/", "mode": "read-only", "max_bytes": 32, "generation": 0,
                     "containment_achieved": "advisory", "entries": [
                         entry("b.txt", b"bee"),
                         {**entry("big.bin", b"x" * 64), "sha256": None},   # over max_bytes
                         entry("report.md", b"# report\n"),
                         entry("sub/a.txt", b"a"),
                         entry("sub/deep/z.bin", b"\x00\x01\x02"),
                     ]})
    assert wire(response) == ("200 OK", [("Content-Type", "application/json"),
                                         ("Content-Length", str(len(body)))], body)


def test_listing_of_a_missing_root_is_empty(tmp_path):
    response = Client(door_for(tmp_path)).get("/resources/files")
    assert response.status_code == 200
    assert response.get_json()["entries"] == []
    assert response.get_json()["max_bytes"] == 10 * 1024 * 1024


def test_listing_of_a_root_that_is_a_file_is_empty(tmp_path):
    write(tmp_path / "out", b"not a directory")
    assert Client(door_for(tmp_path)).get("/resources/files").get_json()["entries"] == []


def test_a_root_of_dot_exports_the_workdir(tmp_path):
    write(tmp_path / "a.txt", b"a")
    listing = Client(door_for(tmp_path, root=".")).get("/resources/files").get_json()
    assert [e["path"] for e in listing["entries"]] == ["a.txt"]


def test_generation_counts_the_tasks_that_ended(tree):
    door = door_for(tree)
    client = Client(door)
    for n in range(2):
        record = TaskRecord(f"tsk_{n:032x}", "ctx_" + "0" * 32)
        record.state = COMPLETED
        door.session.store.add(record)
    assert client.get("/resources/files").get_json()["generation"] == 2
    assert client.get("/resources/files/b.txt").headers["X-Murmur-Generation"] == "2"


# --- a file ------------------------------------------------------------------------------


def read_ok(data, root="out/"):
    return ("200 OK", [("Content-Type", "application/octet-stream"),
                       ("Content-Length", str(len(data))),
                       ("ETag", f'"sha256:{sha(data)}"'),
                       ("X-Murmur-Mtime-Ms", MTIME_MS),
                       ("X-Murmur-Generation", "0"),
                       ("X-Murmur-Containment", "advisory"),
                       ("X-Murmur-Export-Root", root)], data)


@pytest.mark.parametrize("path,data", [
    ("report.md", b"# report\n"),
    ("sub/a.txt", b"a"),
    ("sub/deep/z.bin", b"\x00\x01\x02"),
])
def test_a_file_is_served_with_its_headers(client, path, data):
    assert wire(client.get(f"/resources/files/{path}")) == read_ok(data)


def test_the_path_is_percent_decoded(tree):
    write(tree / "out" / "a b.txt", b"space")
    write(tree / "out" / "café.txt", b"accent")
    client = Client(door_for(tree))
    assert wire(client.get("/resources/files/a%20b.txt")) == read_ok(b"space")
    assert wire(client.get("/resources/files/caf%C3%A9.txt")) == read_ok(b"accent")
    assert wire(client.get("/resources/files/sub%2Fa.txt")) == read_ok(b"a")


def test_an_empty_file_is_served(tree):
    write(tree / "out" / "empty.txt", b"")
    assert wire(Client(door_for(tree)).get("/resources/files/empty.txt")) == read_ok(b"")


def test_a_file_at_max_bytes_is_served_one_over_is_too_large(tree):
    client = Client(door_for(tree, max_bytes=3))
    assert wire(client.get("/resources/files/b.txt")) == read_ok(b"bee")
    assert wire(client.get("/resources/files/report.md")) == TOO_LARGE


def test_too_large(client):
    assert wire(client.get("/resources/files/big.bin")) == TOO_LARGE


# --- what is refused ---------------------------------------------------------------------


@pytest.mark.parametrize("path", [
    pytest.param("/resources/files/", id="empty"),
    pytest.param("/resources/files//etc/passwd", id="absolute"),
    pytest.param("/resources/files/..", id="dotdot"),
    pytest.param("/resources/files/../secret.txt", id="dotdot-out"),
    pytest.param("/resources/files/sub/../report.md", id="dotdot-inside"),
    pytest.param("/resources/files/%2e%2e/secret.txt", id="encoded-dotdot"),
    pytest.param("/resources/files/./report.md", id="dot"),
    pytest.param("/resources/files/sub/./a.txt", id="inner-dot"),
    pytest.param("/resources/files/sub//a.txt", id="empty-component"),
    pytest.param("/resources/files/sub/", id="trailing-slash"),
    pytest.param("/resources/files/report.md%00.txt", id="nul"),
])
def test_paths_that_leave_or_bend_the_root_are_outside_root(client, path):
    assert wire(client.get(path)) == OUTSIDE


@pytest.mark.parametrize("path", [
    pytest.param("escape.txt", id="symlink-out"),
    pytest.param("inside-link.md", id="symlink-inside"),
    pytest.param("sublink/a.txt", id="symlinked-directory"),
    pytest.param("rootlink/secret.txt", id="symlink-to-workdir"),
    pytest.param("sublink", id="symlink-to-directory"),
])
def test_symlinks_are_refused(client, path):
    assert wire(client.get(f"/resources/files/{path}")) == SYMLINK


@pytest.mark.parametrize("path", ["sub", "sub/deep", "empty", "fifo"])
def test_what_is_not_a_regular_file_is_refused(client, path):
    assert wire(client.get(f"/resources/files/{path}")) == NOT_REGULAR


@pytest.mark.parametrize("path", ["missing.md", "sub/missing", "nodir/a.txt",
                                  "report.md/x", "sub/a.txt/y"])
def test_what_does_not_exist_is_not_found(client, path):
    assert wire(client.get(f"/resources/files/{path}")) == NOT_FOUND


@pytest.mark.parametrize("path", ["x" * 256, "sub/" + "x" * 300, "x" * 256 + "/a.txt",
                                  "\u00e9" * 128], ids=["file", "in-a-folder", "folder", "utf-8"])
def test_a_name_longer_than_the_filesystem_holds_is_not_found(client, caplog, path):
    """A component past NAME_MAX (255 bytes) names nothing: its lstat's ENAMETOOLONG was
    a traceback and a JSON-RPC -32603 (status 200) to a GET of the plane."""
    assert wire(client.get(f"/resources/files/{path}")) == NOT_FOUND
    assert "Traceback" not in caplog.text and "failed inside the door" not in caplog.text


def test_a_file_under_a_missing_root_is_not_found(tmp_path):
    assert wire(Client(door_for(tmp_path)).get("/resources/files/a.txt")) == NOT_FOUND


def test_another_path_under_resources_is_not_found(client):
    assert wire(client.get("/resources/other")) == NOT_FOUND
    assert wire(client.get("/resources/")) == NOT_FOUND


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
@pytest.mark.parametrize("path", ["/resources/files", "/resources/files/report.md",
                                  "/resources/files/../x", "/resources/other"])
def test_every_method_but_get_is_not_allowed(client, method, path):
    status, headers, body = NOT_ALLOWED
    if method == "HEAD":        # its headers only (Content-Length as the body's)
        body = b""
    assert wire(client.open(path, method=method, data=b"x")) == (status, headers, body)


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE"])
@pytest.mark.parametrize("path", ["/resources/files", "/resources/files/report.md",
                                  "/resources/files/../x", "/resources/other"])
def test_an_undeclared_plane_refuses_every_request(tree, method, path):
    client = Client(create_app({"name": "test-agent", "version": "0.1.0"}, workdir=str(tree)))
    assert wire(client.open(path, method=method)) == NO_PLANE


def test_a_read_error_is_io_error(client, monkeypatch):
    def failing(fd, n, offset):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(files_mod.os, "pread", failing)
    assert wire(client.get("/resources/files/report.md")) == IO_ERROR
    assert wire(client.get("/resources/files")) == IO_ERROR


# --- the root itself ---------------------------------------------------------------------


def test_a_root_through_a_symlink_is_refused_at_launch(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    os.symlink(str(tmp_path / "elsewhere"), tmp_path / "out")
    with pytest.raises(ManifestError) as raised:
        door_for(tmp_path)
    assert str(raised.value) == ("exports.files.root: 'out/' passes through the symlink out; "
                                 "the operator plane follows no symlink")


def test_a_root_turned_into_a_symlink_later_is_refused(tmp_path):
    write(tmp_path / "elsewhere" / "a.txt", b"a")
    client = Client(door_for(tmp_path))
    os.symlink(str(tmp_path / "elsewhere"), tmp_path / "out")
    assert wire(client.get("/resources/files")) == SYMLINK
    assert wire(client.get("/resources/files/a.txt")) == SYMLINK


def test_a_nested_root_is_walked_without_following(tmp_path):
    write(tmp_path / "real" / "x.txt", b"x")
    os.symlink("real", tmp_path / "link")
    with pytest.raises(ManifestError):
        door_for(tmp_path, root="link/x")
    write(tmp_path / "a" / "b" / "c.txt", b"c")
    client = Client(door_for(tmp_path, root="a/b"))
    assert wire(client.get("/resources/files/c.txt")) == read_ok(b"c", root="a/b")


def test_the_workdir_defaults_to_the_current_directory(tree, monkeypatch):
    monkeypatch.chdir(tree)
    door = create_app({"name": "test-agent", "version": "0.1.0",
                       "exports": {"files": {"root": "out/", "mode": "read-only"}}})
    assert door.workdir == str(tree)
    assert wire(Client(door).get("/resources/files/b.txt")) == read_ok(b"bee")


# --- on an authenticated door ------------------------------------------------------------


@pytest.fixture
def auth_client(tree):
    door = door_for(tree, network={"authentication": AUTH})
    return door, Client(door)


def test_the_scope_is_checked_before_the_plane(auth_client):
    door, client = auth_client
    watcher = {"Authorization": f"Bearer {door.tokens.tokens['watcher']}"}
    body = _compact({"error": "insufficient_scope",
                     "message": "credential 'watcher' does not reach resources/files"})
    expected = ("403 Forbidden", [
        ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
        ("WWW-Authenticate",
         'Bearer realm="test-agent", error="insufficient_scope", scope="resources/files"')],
        body)
    for path in ("/resources/files", "/resources/files/b.txt", "/resources/files/missing",
                 "/resources/files/../x", "/resources/other"):
        assert wire(client.get(path, headers=watcher)) == expected, path
    assert wire(client.put("/resources/files/b.txt", headers=watcher)) == expected


@pytest.mark.parametrize("name", ["operator", "reader"])
def test_a_token_with_the_scope_reads(auth_client, name):
    door, client = auth_client
    headers = {"Authorization": f"Bearer {door.tokens.tokens[name]}"}
    assert wire(client.get("/resources/files/b.txt", headers=headers)) == read_ok(b"bee")
    assert client.get("/resources/files", headers=headers).status_code == 200


def test_no_token_is_refused_before_the_plane(auth_client):
    _, client = auth_client
    assert client.get("/resources/files/b.txt").status_code == 401


def test_an_undeclared_plane_checks_the_scope_first(tree):
    door = create_app({"name": "test-agent", "version": "0.1.0",
                       "network": {"authentication": AUTH}}, workdir=str(tree))
    client = Client(door)
    watcher = {"Authorization": f"Bearer {door.tokens.tokens['watcher']}"}
    reader = {"Authorization": f"Bearer {door.tokens.tokens['reader']}"}
    assert client.get("/resources/files", headers=watcher).status_code == 403
    assert wire(client.get("/resources/files", headers=reader)) == NO_PLANE
