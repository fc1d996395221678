"""Values handlers return that dispatch writes without another json.dumps."""
from __future__ import annotations


class RawJSON(str):
    """A result already serialized as compact JSON text."""

    __slots__ = ()


class RawJSONPieces(tuple):
    """A result already serialized, as JSON texts written one after the other.

    The texts are shared, not copied (a task's cached wire form): an answer
    larger than ``stream.pending_bytes`` is encoded piece by piece as the
    client takes it, so a client that does not read holds no copy of its own.
    """

    __slots__ = ()
