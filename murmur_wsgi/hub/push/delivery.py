"""Delivering one event to one config: signed, 5 s an attempt, retried 3 times.

Network errors, 408, 425, 429 and 5xx are retried after 1 s, 2 s and 4 s;
any other answer, a redirect included, is final; 2xx is delivered (the
test-only ``push.retry_scale`` multiplies the waits). An attempt that fails
unexpectedly (an exception that is neither Refused nor NetworkError: a bug)
is a failed attempt like a network error, retried on the same schedule,
logged once with its type and frames, never its message (http.client's
quote header values, the token among them). Every attempt is signed afresh
(iat, exp) with the same jti. ``sleep`` is the seam for tests:
``sleep(seconds) -> bool``, False when the hub is closing.
"""
from __future__ import annotations

import logging
import os
import traceback

from murmur_wsgi.hub.push import keys
from murmur_wsgi.hub.push.egress import NetworkError, Refused

logger = logging.getLogger(__name__)

ATTEMPT_SECS = 5.0
RETRY_DELAYS = (1.0, 2.0, 4.0)
RETRIED_STATUSES = frozenset({408, 425, 429})
TOKEN_HEADER = "A2A-Notification-Token"


def retried(status: int) -> bool:
    return status in RETRIED_STATUSES or 500 <= status <= 599


def unexpected(ex: BaseException) -> str:
    """An unexpected exception as the log shows it: its type and the frames it went
    through (file, line, function), never its message, which may quote the token."""
    frames = traceback.extract_tb(ex.__traceback__)[-8:]
    where = " < ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                       for f in reversed(frames))
    return f"{type(ex).__name__} at {where}" if where else type(ex).__name__


class Sender:
    """Signs and POSTs notifications through ``egress``."""

    def __init__(self, egress, master: bytes, issuer: str, sleep, retry_scale: float = 1.0):
        self.egress = egress
        self.master = master
        self.issuer = issuer
        self.sleep = sleep
        self.attempt_secs = ATTEMPT_SECS
        self.delays = tuple(d * retry_scale for d in RETRY_DELAYS)

    def key(self, record) -> bytes:
        return keys.derive_key(self.master, record.tenant, record.agent, record.task_id,
                               record.id)

    def headers(self, record, seq: int, body: bytes) -> dict:
        jwt = keys.sign(self.key(record), issuer=self.issuer, audience=record.url,
                        task_id=record.task_id, config_id=record.id, seq=seq, body=body,
                        token=record.token)
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {jwt}",
                   "User-Agent": "murmur-hub-push"}
        if record.token is not None:
            headers[TOKEN_HEADER] = record.token
        return headers

    def send(self, record, seq: int, body: bytes) -> tuple[bool | None, str | None]:
        """``(True, None)`` delivered, ``(False, reason)`` dropped, ``(None, None)`` closing."""
        reason = None
        for attempt in range(len(self.delays) + 1):
            if attempt and not self.sleep(self.delays[attempt - 1]):
                return None, None
            try:
                status = self.egress.post(record.url, body, self.headers(record, seq, body),
                                          self.attempt_secs)
            except Refused as ex:
                return False, str(ex)
            except NetworkError as ex:
                reason = str(ex)
                continue
            except Exception as ex:  # noqa: BLE001 - a failed attempt, never a spinning loop
                reason = f"unexpected error ({type(ex).__name__})"
                logger.error("push: attempt %d of event %d of task %s for config %s failed "
                             "unexpectedly: %s", attempt + 1, seq, record.task_id, record.id,
                             unexpected(ex))
                continue
            if 200 <= status <= 299:
                return True, None
            reason = f"HTTP {status}"
            if not retried(status):
                return False, reason
        return False, reason
