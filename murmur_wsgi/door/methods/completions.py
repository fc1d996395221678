"""A completion: the SendMessage a sub-capsule answers a delegation with (routed at step 9)."""
from __future__ import annotations

import logging

from murmur_wsgi.door.tasks import render
from murmur_wsgi.uris import DOOR_URI
from murmur_wsgi.wire.message import IncomingMessage, completion_received

logger = logging.getLogger(__name__)


def complete(door, call, message: IncomingMessage) -> dict:
    """Deliver the completion's text to the task waiting on it; answer that it was received.

    Step 9 found the delegation awaited (``call.ctx.delegation_id``); if the task
    ended or was answered meanwhile, the delivery is refused -31002.
    """
    delegation_id = call.ctx.delegation_id
    # NOTE: bounded as a message's data parts are: rendered unbounded, a completion of
    # deeply nested data grew about 60 times its size, on the worker's CPU.
    payload = render.agent_text(message, [], untrusted=call.ctx.trust != "trusted",
                                origin="completion",
                                data_bytes=door.manifest.limits["data_text_bytes"])
    context_id = door.session.delegations.deliver(delegation_id, payload)
    if message.door_extension:
        # NOTE: a completion is a SendMessage: its metadata's door URI is echoed as any's.
        call.used_extensions.append(DOOR_URI)
    return completion_received(delegation_id, context_id)
