"""Values handlers return that dispatch writes without another json.dumps."""
from __future__ import annotations


class RawJSON(str):
    """A result already serialized as compact JSON text."""

    __slots__ = ()
