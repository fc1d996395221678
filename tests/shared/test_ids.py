"""Ids: a prefix and a UUIDv7 (RFC 9562) of the time it was made; random UUIDs."""
from __future__ import annotations

import os
import re
import threading
import time
import uuid

from murmur_wsgi.ids import POOL_BYTES, new_id, random_uuid, uuid7_hex

HEX = re.compile(r"^[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$")


def test_each_id_is_a_uuid7_of_its_millisecond_and_unique():
    before = time.time_ns() // 1_000_000
    ids = [uuid7_hex() for _ in range(5000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    for value in ids:
        assert HEX.match(value), value
        parsed = uuid.UUID(hex=value)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
        assert before <= int(value[:12], 16) <= after
    assert len({value[13:16] for value in ids}) > 1000          # rand_a is random
    assert {value[16] for value in ids} == set("89ab")           # the variant, then rand_b


def test_threads_never_get_another_millisecond_s_time():
    out: list[tuple[int, int, str]] = []

    def make():
        for _ in range(2000):
            before = time.time_ns() // 1_000_000
            value = uuid7_hex()
            out.append((before, time.time_ns() // 1_000_000, value))

    threads = [threading.Thread(target=make) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(before <= int(value[:12], 16) <= after for before, after, value in out)
    assert new_id("tsk").startswith("tsk_") and HEX.match(new_id("evt")[4:])


# --- random_uuid: the hub's ids ----------------------------------------------------------


def test_a_random_uuid_is_a_canonical_version_4_uuid_unique_across_threads():
    out: list[str] = []

    def make():
        out.extend(random_uuid() for _ in range(3 * POOL_BYTES // 16))   # pools run out

    threads = [threading.Thread(target=make) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(out) == len(set(out)) == 4 * 3 * POOL_BYTES // 16
    for value in out:
        parsed = uuid.UUID(value)
        assert str(parsed) == value and parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_a_forked_child_draws_other_uuids_than_its_parent():
    random_uuid()                                   # the parent's pool holds the next ones
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the child: its next ids, to the parent
        os.close(read)
        os.write(write, " ".join(random_uuid() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    assert os.waitpid(pid, 0)[1] == 0
    parent = [random_uuid() for _ in range(8)]
    assert len(child) == 8 and not set(child) & set(parent)


def test_a_random_uuid_is_its_bytes_as_uuid_makes_a_version_4_of_them(monkeypatch):
    from murmur_wsgi import ids

    # every value of the byte that holds the variant, and of the one that holds the version
    pool = b"".join(bytes([i, 255 - i] * 3 + [i, 255 - i, i] + [255 - i] * 7)
                    for i in range(256))
    monkeypatch.setattr(ids, "_pool", (pool, __import__("itertools").count()))
    got = [random_uuid() for _ in range(256)]
    assert got == [str(uuid.UUID(bytes=pool[at:at + 16], version=4))
                   for at in range(0, len(pool), 16)]
    assert random_uuid() not in got                   # the pool spent: a new one
