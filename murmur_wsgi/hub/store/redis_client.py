"""The Redis store's connection: the client, its key prefix, and failures as ``StoreError``.

Every ``redis.RedisError`` (down, slow past ``timeout_secs``, out of memory)
is raised as ``StoreError``, whose message is public. Commands are retried
once at once (a pooled connection can be stale after Redis restarts).
"""
from __future__ import annotations

import functools
import logging

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from murmur_wsgi.hub.store.base import StoreError

logger = logging.getLogger(__name__)

PREFIX = "murmur:hub:"


def guarded(method):
    """Raise ``StoreError`` for any failure of Redis, logged once per method call."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except redis.RedisError as ex:
            logger.warning("redis store: %s failed: %s", method.__name__, type(ex).__name__)
            raise StoreError() from None
    return call


def connect(url: str, timeout_secs: float) -> redis.Redis:
    """A client of ``url`` (thread-safe, pooled) whose every wait ends within ``timeout_secs``."""
    return redis.Redis.from_url(
        url, decode_responses=True, socket_timeout=timeout_secs,
        socket_connect_timeout=timeout_secs, retry=Retry(NoBackoff(), 1),
        health_check_interval=30)


def public_url(url: str) -> str:
    """The URL without its password, for logs."""
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.rsplit("@", 1)[1]
    return scheme + sep + rest
