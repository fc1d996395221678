"""Fixtures of the door's task tests: doors that take tasks one way or another."""
from __future__ import annotations

import pytest

from tests.conftest import Rpc, make_door


@pytest.fixture
def queue_rpc():
    """A queue door (one task may wait) whose agent may start ``sleep`` in the background."""
    door = make_door(lifecycle={"task_acceptance": "queue", "queue_depth": 1},
                     capabilities={"shell": {"allow": ["sleep"]}})
    yield Rpc(door)
    door.close()
