"""SendStreamingMessage, SubscribeToTask, murmur.WatchSession."""
from __future__ import annotations

import logging

from murmur_wsgi.errors import InternalError

logger = logging.getLogger(__name__)


def send_streaming_message(door, call):
    raise InternalError("SendStreamingMessage is not served yet")


def subscribe_to_task(door, call):
    raise InternalError("SubscribeToTask is not served yet")


def watch_session(door, call):
    raise InternalError("murmur.WatchSession is not served yet")
