"""A final notification of a task whose artifacts cannot fit one (push/body.py): built
without rendering them, on the memory store and on Redis."""
from __future__ import annotations

import json
import tracemalloc

from murmur_wsgi.hub import create_hub
from murmur_wsgi.hub.push.body import MAX_BODY_BYTES, OMITTED, final_body
from tests.hub.conftest import HubClient, close_hub
from tests.hub.push_util import push_config

CHUNKS = 300_000                  # "/stream": an answer of about 3.5 MB


def test_a_final_body_without_artifacts_is_built_without_rendering_them(store):
    config = push_config()
    config["store"] = store
    hub = create_hub(config)
    try:
        task_id = HubClient(hub).send(f"/stream {CHUNKS}")["id"]
        task = hub.store.get("acme", "echo", task_id)
        answer = len(hub.store.render(task))
        assert answer > 3_000_000
        tracemalloc.start()
        try:
            body = final_body(hub.store, task)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        final = json.loads(body)["task"]
        assert len(body) <= MAX_BODY_BYTES
        assert final["status"]["state"] == "TASK_STATE_COMPLETED"
        assert final["metadata"] == OMITTED and "artifacts" not in final
        # NOTE: before, it was rendered whole first, then dropped: 3 times the answer at
        # its peak on the memory store (177 MB and 0.2 s of CPU for a 59 MB one), 3.9 times
        # on Redis (its record read again for each render: 0.4 s).
        assert peak < answer // 10, (peak, answer)
    finally:
        close_hub(hub)
