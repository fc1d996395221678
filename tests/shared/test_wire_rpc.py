"""The JSON-RPC response's text: an id written as each application's encoder writes it."""
import json

from hypothesis import given
from hypothesis import strategies as st

from murmur_wsgi.wire import rpc
from murmur_wsgi.wire.encode import compact_ascii, compact_utf8

IDS = st.one_of(st.integers(), st.integers(min_value=-2**80, max_value=2**80), st.text(),
                st.none(), st.booleans())


@given(IDS)
def test_every_id_is_written_as_the_encoder_writes_it(request_id):
    for dumps in (compact_ascii, compact_utf8):
        assert rpc.head(request_id, dumps) == '{"jsonrpc":"2.0","id":' + dumps(request_id)
        assert rpc.result(request_id, "{}", dumps) == \
            '{"jsonrpc":"2.0","id":' + dumps(request_id) + ',"result":{}}'
        text = rpc.error(request_id, {"code": -32600, "message": "é"}, dumps)
        assert json.loads(text) == {"jsonrpc": "2.0", "id": request_id,
                                    "error": {"code": -32600, "message": "é"}}
        assert text == '{"jsonrpc":"2.0","id":' + dumps(request_id) + ',"error":' + \
            dumps({"code": -32600, "message": "é"}) + "}"


def test_an_integer_subclass_is_left_to_the_encoder():
    class Number(int):
        pass

    assert rpc.result(True, "1") == '{"jsonrpc":"2.0","id":true,"result":1}'
    assert rpc.result(Number(7), "1") == '{"jsonrpc":"2.0","id":7,"result":1}'
