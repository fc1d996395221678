"""Sorted keys by name whose oldest go cheaply: the lists of the memory store's indexes
(``memory_index``).

PERF: a tenant at its ``tasks.max_per_tenant`` forgets its oldest finished task at every
end, near the front of its agent's longest lists (every task's, its state's, its status
times'). ``del keys[i]`` there moved every key after it, under the store's lock: about
300 us an end at a cap of 200,000, 50 at 2,000 (docs/performance.md). A list longer than
``SHORT`` becomes ``Headed`` instead at its first removal near its front: it keeps a dead
prefix, its keys starting at ``lo``. A key goes by moving the keys on its shorter side one
place (those before it up, over a dead place, or those after it down): O(1) for the
oldest. A key put before most of them takes a dead place back the same way. The dead
prefix is cut once it passes half the list (``del keys[:lo]``, which moves fewer keys than
the removals that made it): amortized O(1) a removal, and a list holds at most twice its
keys' places. A dead place holds None: it keeps no key alive, and a comparison with it
would raise.

Every read bisects and slices from ``first(keys)``: O(log n + page), exact.

MEMORY: an index of one key is a tuple (the garbage collector stops tracking it), a short
one a plain list; only a long list has its head (one slot more).

Concurrency: none of its own; its owner's lock guards it (``memory_index``).
"""
from __future__ import annotations

import bisect

SHORT = 64                 # a list this long or shorter moves its keys (one memmove: cheap)


class Headed(list):
    """A sorted list whose keys start at ``lo`` (the places before it are dead: None)."""

    __slots__ = ("lo",)

    def __init__(self, keys):
        super().__init__(keys)
        self.lo = 0


def first(keys) -> int:
    """The index of the first live key of ``keys`` (a tuple, a list or a ``Headed``)."""
    return keys.lo if type(keys) is Headed else 0


class SortedKeys:
    """Keys by name, each name's in ascending order: ``get`` a name's container, its keys
    from ``first`` of it on."""

    __slots__ = ("_keys",)

    def __init__(self):
        self._keys: dict = {}          # name -> (key,) | [keys] | Headed

    def get(self, name):
        return self._keys.get(name)

    def count(self) -> int:
        """The keys held, every name's."""
        return sum(len(keys) - first(keys) for keys in self._keys.values())

    def put(self, name, key) -> None:
        keys = self._keys.get(name)
        if keys is None:
            # MEMORY: an index of one task (a context's, most often) is a tuple, which the
            # garbage collector stops tracking; a list from its second task on.
            self._keys[name] = (key,)
            return
        if type(keys) is tuple:
            self._keys[name] = keys = list(keys)
        if key > keys[-1]:
            keys.append(key)                      # the usual case: the newest
        elif type(keys) is not Headed:
            bisect.insort(keys, key)              # no dead place to take back
        else:
            lo = keys.lo
            i = bisect.bisect_left(keys, key, lo)
            if lo and i - lo < len(keys) - i:     # the keys before it move up, to a dead place
                keys[lo - 1:i - 1] = keys[lo:i]
                keys[i - 1] = key
                keys.lo = lo - 1
            else:
                keys.insert(i, key)

    def drop(self, name, key) -> None:
        # PERF: at every change of a task: the usual cases (the newest, a short list, a
        # plain one) read no head and check no dead prefix.
        keys = self._keys.get(name)
        if keys is None:
            return
        kind = type(keys)
        if kind is tuple:
            if keys[0] == key:
                del self._keys[name]
            return
        if keys[-1] == key:
            keys.pop()                            # the usual case: the newest moves on
            if kind is list:
                if not keys:
                    del self._keys[name]
                return
            lo = keys.lo
        else:
            lo = keys.lo if kind is Headed else 0
            i = bisect.bisect_left(keys, key, lo)
            n = len(keys)
            if i == n or keys[i] != key:
                return
            if not lo and n <= SHORT or n - 1 - i <= i - lo:
                del keys[i]                       # the keys after it move down
                if not lo:
                    return                        # a plain list: no dead prefix to cut
            else:                                 # the keys before it move up: the oldest
                if kind is list:                  # once, a list's first
                    self._keys[name] = keys = Headed(keys)
                keys[lo + 1:i + 1] = keys[lo:i]
                keys[lo] = None
                keys.lo = lo = lo + 1
        if len(keys) == lo:
            del self._keys[name]
        elif lo * 2 > len(keys):                  # the dead prefix past half: cut
            del keys[:lo]
            keys.lo = 0
