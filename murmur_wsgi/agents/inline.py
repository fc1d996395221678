"""An agent's word that a run ends without waiting: its ``inline`` (docs/agents.md).

``True``, or a function of the task's text returning ``True`` for a run that will not
wait (no ask, wait, sleep, process or network call). A held request whose task starts
at once may then run the agent in its own thread instead of starting one: both
applications do (the door's held SendMessage, the hub's blocking SendMessage).
"""
from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def runs_inline(agent, text: str) -> bool:
    """True when ``agent`` says its run on ``text`` ends without waiting.

    NOTE: such a run never blocks, so the held request it runs in answers what it would
    have answered anyway: under gevent others run only while it gives way
    (murmur_wsgi/turns.py), as on OS threads at any time: a cancel during the run ends the
    task at once, and the held answer follows when the agent returns. A hook that raises
    counts as False (logged), its attribute's read included: the task is
    already accepted, and must start.
    """
    try:
        # NOTE: the attribute is the agent's code too (a property): read under the guard.
        inline = getattr(agent, "inline", False)
        if inline is True:
            return True
        return callable(inline) and inline(text) is True
    except Exception:  # noqa: BLE001 - an agent's hook must not fail the request
        logger.exception("the agent's inline hook failed; the task runs on its thread")
        return False
