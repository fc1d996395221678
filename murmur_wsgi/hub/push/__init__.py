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

# NOTE: imported on first use, so that reading hub.yaml (its push block's rules, in
# settings.py) imports neither ssl nor jwt: gunicorn's master reads it before a gevent
# worker patches ssl, and ssl imported there first makes every worker warn.
__all__ = ["Push", "PushUnavailable"]


def __getattr__(name):
    if name in __all__:
        from murmur_wsgi.hub.push import service

        return getattr(service, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
