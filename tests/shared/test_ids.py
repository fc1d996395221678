"""Ids: a prefix and a UUIDv7 (RFC 9562) of the time it was made."""
from __future__ import annotations

import re
import threading
import time
import uuid

from murmur_wsgi.ids import new_id, uuid7_hex

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
