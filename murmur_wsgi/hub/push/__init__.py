"""Push notifications on the hub (the text's "Push notifications").

rules.py      which configs are accepted (-32602 otherwise)
addresses.py  the public internet, and nothing else
keys.py       per-config keys and the notification's JWT
body.py       what one notification carries
egress.py     the guarded, pinned HTTPS POST
delivery.py   one event: signed attempts and retries
dispatcher.py off the request path, in order, under a lease
methods.py    the four *TaskPushNotificationConfig methods and SendMessage's config
service.py    ``Push``: all of it for one hub

The configs and delivery leases are the store's ``push`` part (store/push_base.py, its
memory and Redis implementations beside it).
"""
from __future__ import annotations

from murmur_wsgi.hub.push.service import Push, PushUnavailable

__all__ = ["Push", "PushUnavailable"]
