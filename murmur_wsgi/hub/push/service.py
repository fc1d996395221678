"""``Push``: the hub's push notifications, built once per hub when ``push.enabled``."""
from __future__ import annotations

import logging

from murmur_wsgi.hub.push import keys
from murmur_wsgi.hub.push.delivery import Sender
from murmur_wsgi.hub.push.dispatcher import Dispatcher
from murmur_wsgi.hub.push.egress import Egress
from murmur_wsgi.hub.push.settings import networks, secret_bytes
from murmur_wsgi.hub.store.push_base import PushStorage

logger = logging.getLogger(__name__)


class PushUnavailable(Exception):
    """The configured store cannot keep push configs (``str()`` names the key)."""


class Push:
    """Rules, keys, egress and the dispatcher of one hub.

    Test seams: ``egress.resolver(host, port) -> [address]`` and
    ``sender.sleep(seconds) -> bool`` (retry waits).
    """

    def __init__(self, config, stores):
        store = stores.push
        if not isinstance(store, PushStorage):
            # NOTE: the scheme only: a Redis URL may carry a password.
            kind = config.store.split(":", 1)[0]
            raise PushUnavailable(f"push.enabled: the store '{kind}' does not keep "
                                  "push configs in this version")
        block = config.push
        self.store = store
        self.ports = frozenset(block["ports"])
        self.allow = networks(block["allow_networks"])
        if self.allow:
            logger.warning("push.allow_networks is set (%s): notifications may reach these "
                           "networks; this is for the project's own tests, never production",
                           ", ".join(block["allow_networks"]))
        if block["retry_scale"] != 1:
            logger.warning("push.retry_scale is %g: retry waits are not 1, 2 and 4 s; this is "
                           "for the project's own tests, never production", block["retry_scale"])
        self.master = secret_bytes(block["secret"])
        self.egress = Egress(self.ports, self.allow, block["ca_file"])
        self.dispatcher = Dispatcher(store, stores.tasks, None)
        self.sender = Sender(self.egress, self.master, config.announced_url,
                             self.dispatcher.sleep, block["retry_scale"])
        self.dispatcher.sender = self.sender

    def key(self, record) -> str:
        """The config's signing key as Create answers it (base64url, no padding)."""
        return keys.encode_key(self.sender.key(record))

    def start(self) -> None:
        self.dispatcher.start()

    def close(self) -> None:
        self.dispatcher.close()
