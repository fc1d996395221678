"""The operator plane's bounds: digests cached, big files unread, walks bounded, reads streamed."""
from __future__ import annotations

import json
import os

import pytest
from werkzeug.test import Client, EnvironBuilder

from murmur_wsgi import create_app
from murmur_wsgi.door.manifest import ManifestError, load_manifest
from murmur_wsgi.door.planes import digests as digests_mod
from murmur_wsgi.door.planes.files import SEND_CHUNK, FileChanged
from tests.door.test_files_plane import MTIME_MS, MTIME_NS, TOO_LARGE, read_ok, sha, wire, write

DEEP = 1_500
GET_TASK = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                       "params": {"id": "tsk_" + "0" * 32}})


def door_for(workdir, **files):
    """A public door exporting ``out/`` under ``workdir`` with these exports.files keys."""
    return create_app({"name": "test-agent", "version": "0.1.0",
                       "exports": {"files": {"root": "out/", **files}}}, workdir=str(workdir))


def paths(listing: dict) -> list[str]:
    return [entry["path"] for entry in listing["entries"]]


def open_under(root) -> int:
    """This process's descriptors open on ``root`` or below it (other threads' sockets and
    pipes, a test runner's among them, are not counted)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:                             # closed since it was listed
            continue
        count += target == str(root) or target.startswith(f"{root}/")
    return count


# --- a file over max_bytes ---------------------------------------------------------------


def test_a_file_over_max_bytes_is_listed_unhashed_and_never_read(tmp_path):
    write(tmp_path / "out" / "big.bin", b"x" * 64)
    write(tmp_path / "out" / "small.txt", b"small")
    for name in ("big.bin", "small.txt"):           # atime older than mtime: relatime records
        os.utime(tmp_path / "out" / name, ns=(0, MTIME_NS))     # the next read of each
    client = Client(door_for(tmp_path, max_bytes=32))
    assert client.get("/resources/files").get_json()["entries"] == [
        {"path": "big.bin", "size_bytes": 64, "mtime_ms": int(MTIME_MS), "sha256": None},
        {"path": "small.txt", "size_bytes": 5, "mtime_ms": int(MTIME_MS), "sha256": sha(b"small")},
    ]
    assert wire(client.get("/resources/files/big.bin")) == TOO_LARGE
    assert os.stat(tmp_path / "out" / "small.txt").st_atime_ns != 0      # hashed: read
    assert os.stat(tmp_path / "out" / "big.bin").st_atime_ns == 0        # never read


def test_a_huge_sparse_file_costs_the_listing_nothing(tmp_path):
    (tmp_path / "out").mkdir()
    with open(tmp_path / "out" / "huge.bin", "wb") as fh:
        fh.truncate(1 << 40)                        # 1 TiB: hours to hash
    listing = Client(door_for(tmp_path)).get("/resources/files").get_json()
    assert [(e["path"], e["size_bytes"], e["sha256"]) for e in listing["entries"]] == [
        ("huge.bin", 1 << 40, None)]


# --- the digest cache --------------------------------------------------------------------


@pytest.fixture
def settled(monkeypatch):
    """Files written by the test count as settled (no wait for their timestamps' tick)."""
    monkeypatch.setattr(digests_mod, "RACY_NS", 0)


def test_an_unchanged_file_is_hashed_once(tmp_path, settled):
    write(tmp_path / "out" / "a.txt", b"a")
    write(tmp_path / "out" / "b.txt", b"bee")
    door = door_for(tmp_path)
    client = Client(door)
    first = client.get("/resources/files").get_data()
    assert door.files_plane.digests.hashed == 2
    assert client.get("/resources/files").get_data() == first
    assert wire(client.get("/resources/files/b.txt")) == read_ok(b"bee")
    assert door.files_plane.digests.hashed == 2

    write(tmp_path / "out" / "b.txt", b"BEE")        # same size and mtime: a new ctime
    assert wire(client.get("/resources/files/b.txt")) == read_ok(b"BEE")
    assert door.files_plane.digests.hashed == 3
    listing = client.get("/resources/files").get_json()
    assert [e["sha256"] for e in listing["entries"]] == [sha(b"a"), sha(b"BEE")]
    assert door.files_plane.digests.hashed == 3


def test_a_file_changed_just_before_its_hashing_is_not_cached(tmp_path):
    write(tmp_path / "out" / "a.txt", b"a")
    door = door_for(tmp_path)
    client = Client(door)
    for _ in range(2):
        assert client.get("/resources/files").get_json()["entries"][0]["sha256"] == sha(b"a")
    assert door.files_plane.digests.hashed == 2      # its ctime is within RACY_NS of now


def test_the_cache_is_bounded_by_max_entries(tmp_path, settled):
    for n in range(5):
        write(tmp_path / "out" / f"{n}.txt", str(n).encode())
    door = door_for(tmp_path, max_entries=3)
    client = Client(door)
    for n in range(5):
        assert client.get(f"/resources/files/{n}.txt").status_code == 200
    assert len(door.files_plane.digests._digests) == 3
    assert client.get("/resources/files/4.txt").status_code == 200
    assert door.files_plane.digests.hashed == 5       # the latest stayed
    assert client.get("/resources/files/0.txt").status_code == 200
    assert door.files_plane.digests.hashed == 6       # the oldest was dropped


# --- bounded walks -----------------------------------------------------------------------


def make_deep(root, depth: int, files_at: tuple[int, ...]) -> None:
    """``d/d/…/d`` ``depth`` directories deep, a ``f.txt`` in each level of ``files_at``."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(1, depth + 1):
            rel = "/".join(["d"] * level)
            os.mkdir(rel, dir_fd=fd)
            if level in files_at:
                leaf = os.open(rel + "/f.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd)
                os.close(leaf)
    finally:
        os.close(fd)


def remove_deep(root, depth: int) -> None:
    """Remove what ``make_deep`` made, deepest first (shutil.rmtree recurses)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth, 0, -1):
            rel = "/".join(["d"] * level)
            if os.path.lexists(f"/proc/self/fd/{fd}/{rel}/f.txt"):
                os.unlink(rel + "/f.txt", dir_fd=fd)
            os.rmdir(rel, dir_fd=fd)
    finally:
        os.close(fd)


@pytest.fixture
def deep_tree(tmp_path):
    (tmp_path / "out").mkdir()
    make_deep(tmp_path / "out", DEEP, files_at=(10, 63, 64, DEEP))
    yield tmp_path
    remove_deep(tmp_path / "out", DEEP)


def test_a_1500_deep_tree_is_listed_to_depth_64_and_the_door_stays_healthy(deep_tree):
    door = door_for(deep_tree)
    client = Client(door)
    before = open_under(deep_tree)
    response = client.get("/resources/files")
    assert response.status_code == 200
    listing = response.get_json()
    assert listing["truncated"] is True
    # f.txt at level 63 has 64 path components, the one at level 64 has 65: left out
    assert paths(listing) == sorted(["d/" * 10 + "f.txt", "d/" * 63 + "f.txt"])
    assert open_under(deep_tree) == before == 0
    assert client.get("/resources/files").get_json() == listing
    assert client.get("/resources/files/" + "d/" * 10 + "f.txt").status_code == 200
    answer = client.post("/", data=GET_TASK, headers={"A2A-Version": "1.0"},
                         content_type="application/json").get_json()
    assert answer["error"]["code"] == -32001


def test_max_depth_bounds_the_path_components_listed(tmp_path):
    write(tmp_path / "out" / "a.txt", b"a")
    write(tmp_path / "out" / "sub" / "b.txt", b"b")
    write(tmp_path / "out" / "sub" / "deep" / "c.txt", b"c")
    listing = Client(door_for(tmp_path, max_depth=2)).get("/resources/files").get_json()
    assert (paths(listing), listing["truncated"]) == (["a.txt", "sub/b.txt"], True)
    listing = Client(door_for(tmp_path, max_depth=3)).get("/resources/files").get_json()
    assert paths(listing) == ["a.txt", "sub/b.txt", "sub/deep/c.txt"]
    assert "truncated" not in listing


def test_a_listing_stops_at_10000_entries_by_default(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for n in range(10_001):
        (out / f"{n:05}").touch()
    listing = Client(door_for(tmp_path)).get("/resources/files").get_json()
    assert (len(listing["entries"]), listing["truncated"]) == (10_000, True)
    (out / "00000").unlink()
    listing = Client(door_for(tmp_path)).get("/resources/files").get_json()
    assert (len(listing["entries"]), "truncated" in listing) == (10_000, False)


def test_max_entries_counts_every_entry_walked(tmp_path):
    write(tmp_path / "out" / "sub" / "a.txt", b"a")          # sub/ is an entry too
    write(tmp_path / "out" / "b.txt", b"b")
    listing = Client(door_for(tmp_path, max_entries=3)).get("/resources/files").get_json()
    assert (paths(listing), "truncated" in listing) == (["b.txt", "sub/a.txt"], False)
    listing = Client(door_for(tmp_path, max_entries=2)).get("/resources/files").get_json()
    assert (len(listing["entries"]), listing["truncated"]) == (1, True)


@pytest.mark.parametrize("key, default", [("max_depth", 64), ("max_entries", 10_000)])
def test_the_walk_bounds_have_defaults(key, default):
    manifest = load_manifest({"name": "a", "version": "1", "exports": {"files": {"root": "o"}}})
    assert manifest.exports["files"][key] == default


@pytest.mark.parametrize("key, value", [
    ("max_depth", 0), ("max_depth", 257), ("max_depth", "64"), ("max_depth", True),
    ("max_entries", 0), ("max_entries", 1_000_001), ("max_entries", 1.5), ("max_entries", None),
])
def test_bad_walk_bounds_name_their_key(key, value):
    with pytest.raises(ManifestError) as raised:
        load_manifest({"name": "a", "version": "1",
                       "exports": {"files": {"root": "o", key: value}}})
    assert str(raised.value).startswith(f"exports.files.{key}: ")
    assert "\n" not in str(raised.value)


# --- streamed reads and If-None-Match ----------------------------------------------------


def start(door, path: str, **headers):
    """Call the door as a WSGI server does: (status, headers, the body iterable)."""
    seen = {}

    def start_response(status, response_headers, exc_info=None):
        seen.update(status=status, headers=response_headers)

    environ = EnvironBuilder(path=path, headers=headers).get_environ()
    body = door(environ, start_response)
    return seen["status"], seen["headers"], body


def test_a_read_is_streamed_in_chunks_and_closes_its_file(tmp_path):
    data = os.urandom(3 * SEND_CHUNK + 5)
    write(tmp_path / "out" / "data.bin", data)
    door = door_for(tmp_path)
    assert open_under(tmp_path) == 0
    status, headers, body = start(door, "/resources/files/data.bin")
    assert (status, dict(headers)["Content-Length"]) == ("200 OK", str(len(data)))
    assert open_under(tmp_path) == 1               # the file, open while it is sent
    chunks = list(body)
    body.close()
    assert [len(chunk) for chunk in chunks] == [SEND_CHUNK] * 3 + [5]
    assert b"".join(chunks) == data
    assert open_under(tmp_path) == 0

    _, _, unread = start(door, "/resources/files/data.bin")
    unread.close()                                  # a client gone before the first byte
    assert open_under(tmp_path) == 0


def test_a_file_changed_while_it_is_sent_cuts_the_response(tmp_path):
    data = b"a" * (2 * SEND_CHUNK)
    write(tmp_path / "out" / "data.bin", data)
    status, _, body = start(door_for(tmp_path), "/resources/files/data.bin")
    chunks = iter(body)
    assert (status, next(chunks)) == ("200 OK", data[:SEND_CHUNK])
    with open(tmp_path / "out" / "data.bin", "ab") as fh:
        fh.write(b"more")
    with pytest.raises(FileChanged):
        next(chunks)
    body.close()


def not_modified(data, root="out/"):
    return ("304 Not Modified", read_ok(data, root)[1][2:], b"")


@pytest.mark.parametrize("match", [
    pytest.param('"sha256:{}"', id="its-etag"),
    pytest.param('W/"sha256:{}"', id="weak"),
    pytest.param('"other", "sha256:{}"', id="in-a-list"),
    pytest.param("*", id="any"),
])
def test_if_none_match_with_the_etag_is_not_modified(tmp_path, match):
    write(tmp_path / "out" / "b.txt", b"bee")
    client = Client(door_for(tmp_path))
    headers = {"If-None-Match": match.format(sha(b"bee"))}
    assert wire(client.get("/resources/files/b.txt", headers=headers)) == not_modified(b"bee")


def test_if_none_match_with_another_etag_reads(tmp_path):
    write(tmp_path / "out" / "b.txt", b"bee")
    client = Client(door_for(tmp_path))
    headers = {"If-None-Match": f'"sha256:{sha(b"old")}"'}
    assert wire(client.get("/resources/files/b.txt", headers=headers)) == read_ok(b"bee")


def test_if_none_match_does_not_lift_the_size_limit(tmp_path):
    write(tmp_path / "out" / "big.bin", b"x" * 64)
    client = Client(door_for(tmp_path, max_bytes=32))
    assert wire(client.get("/resources/files/big.bin", headers={"If-None-Match": "*"})) == TOO_LARGE
