"""One table of codes (codes.py): the door's catalogue and the client's errors read it."""
from __future__ import annotations

import pytest

from murmur_wsgi import errors
from murmur_wsgi.client import errors as client_errors
from murmur_wsgi import codes


def test_the_catalogue_is_the_table():
    assert set(errors.CATALOGUE) == set(codes.CODES)
    for code, cls in errors.CATALOGUE.items():
        assert cls.wire is codes.CODES[code]


@pytest.mark.parametrize("code", sorted(codes.CODES))
def test_door_and_client_name_the_same_entry(code):
    entry = codes.CODES[code]
    door_cls = errors.CATALOGUE[code]
    client_cls = client_errors.RpcError._by_code[code]
    assert door_cls.code == client_cls.code == code
    assert client_cls.wire is entry
    if entry.reason is None:
        assert not issubclass(door_cls, errors.A2AError)
    else:
        assert (door_cls.reason, door_cls.domain) == (entry.reason, entry.domain)


@pytest.mark.parametrize("code", sorted(codes.CODES))
def test_the_client_reads_what_the_door_writes(code):
    door_error = errors.CATALOGUE[code].__new__(errors.CATALOGUE[code])
    errors.RpcError.__init__(door_error)
    if isinstance(door_error, errors.A2AError):
        door_error.metadata = {"taskId": "tsk_1"}
    read = client_errors.RpcError.from_error(door_error.error_object())
    assert type(read) is client_errors.RpcError._by_code[code]
    assert read.code == code
    assert read.reason == codes.CODES[code].reason
    assert read.domain == codes.CODES[code].domain
