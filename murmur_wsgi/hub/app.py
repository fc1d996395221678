"""``create_hub()``: many agents of many tenants behind one address, as a WSGI callable."""
from __future__ import annotations

import logging
import threading
import time
import weakref

from murmur_wsgi.agents import AgentLoadError, agent_from_spec
from murmur_wsgi.agents.process import REAP_SECS
from murmur_wsgi.hub.admission import Admission
from murmur_wsgi.hub.auth import Credentials
from murmur_wsgi.hub.cards import card_bodies
from murmur_wsgi.hub.config import ConfigError, HubConfig, load_config, load_config_file
from murmur_wsgi.hub.held import HeldAnswers
from murmur_wsgi.hub.methods import METHODS
from murmur_wsgi.hub.routes import handle
from murmur_wsgi.hub.run_registry import Runs
from murmur_wsgi.hub.store import StoreError, StoreRefused, open_stores

logger = logging.getLogger(__name__)

# Every hub of this process not yet closed: what the gunicorn hooks close on SIGTERM.
_LIVE: weakref.WeakSet = weakref.WeakSet()


def live_hubs() -> list:
    return list(_LIVE)


def load_agents(config: HubConfig) -> dict:
    """``(tenant, name) -> callable`` of every configured agent (published or not)."""
    agents = {}
    for tenant, block in config.tenants.items():
        for name, spec in block["agents"].items():
            try:
                agents[(tenant, name)] = agent_from_spec(spec["agent"])
            except AgentLoadError as ex:
                raise ConfigError(f"tenants.{tenant}.agents.{name}.{ex}") from None
    return agents


class Hub:
    """The hub as a WSGI application; no module globals, so it embeds like the door.

    Concurrency:
        ``_subs_lock`` guards ``_subscriptions`` (open SubscribeToTask streams per
        tenant). Everything else that changes lives in the store and ``Runs``.
    """

    def __init__(self, config: HubConfig):
        self.config = config
        if not config.public_url:
            logger.warning("public_url is empty: every /a2a/v1 path answers 404 until it is set")
        self.credentials = Credentials(config)
        self.cards = card_bodies(config)
        self.agents = load_agents(config)
        try:
            self.stores = open_stores(config)
        except StoreRefused as ex:
            raise ConfigError(f"store: {ex}") from None
        self.store = self.stores.tasks
        self.admission = Admission(config, self.stores.counters)
        self.runs = Runs(self.store, self.admission, config.pricing,
                         config.events["merge_secs"])
        self.metrics = None
        if config.metrics["enabled"]:
            from murmur_wsgi.hub.metrics import HubMetrics

            self.metrics = self.runs.metrics = HubMetrics(METHODS)
        self.push = None
        self.methods = METHODS
        if config.push["enabled"]:
            self._start_push()
        self.closing = False
        self.replica = None
        if self.store.shared:
            from murmur_wsgi.hub.replica import Replica

            self.replica = Replica(self)
            self.replica.start()
        if self.push is not None:
            self.push.start()       # after the first heartbeat: its leases count at once
        self.held = HeldAnswers(config.limits["worker_answer_bytes"])
        self._subs_lock = threading.Lock()
        self._subscriptions: dict[str, int] = {}        # guarded by _subs_lock
        _LIVE.add(self)

    def _start_push(self) -> None:
        from murmur_wsgi.hub.push import Push, PushUnavailable
        from murmur_wsgi.hub.push.methods import METHODS as PUSH_METHODS

        try:
            self.push = Push(self.config, self.stores)
        except PushUnavailable as ex:
            raise ConfigError(str(ex)) from None
        self.methods = {**METHODS, **PUSH_METHODS}

    def limits(self, tenant: str) -> dict:
        return self.config.tenant_limits(tenant)

    def subscribe(self, tenant: str) -> bool:
        """Take one of the tenant's subscription slots; False when all are taken."""
        limit = self.limits(tenant)["max_subscriptions"]
        with self._subs_lock:
            if self._subscriptions.get(tenant, 0) >= limit:
                return False
            self._subscriptions[tenant] = self._subscriptions.get(tenant, 0) + 1
            return True

    def unsubscribe(self, tenant: str) -> None:
        with self._subs_lock:
            self._subscriptions[tenant] = max(0, self._subscriptions.get(tenant, 0) - 1)

    # PERF: the WSGI call is ``handle`` itself, one Python call fewer per request.
    __call__ = handle

    def close(self, drain_timeout: float | None = None) -> int:
        """Drain: refuse new runs, wait for those in flight, end the rest FAILED.

        Returns how many runs were interrupted. Idempotent.
        """
        _LIVE.discard(self)
        self.closing = True
        timeout = self.config.drain_timeout_secs if drain_timeout is None else drain_timeout
        interrupted = self.runs.drain(timeout)
        self.runs.close()
        if interrupted:
            logger.warning("shutdown: %d runs interrupted after %g s", interrupted, timeout)
        if self.replica is not None:
            self.replica.stop()
            try:
                self.runs.retry_unwritten()
            except StoreError:
                logger.warning("shutdown: %d ends could not be written; the sweep of another "
                               "replica ends those tasks", len(self.runs.unwritten))
        if self.push is not None:
            self.push.close()
        self.stores.close()
        # NOTE: last: a harness's grace (cancel_grace_secs) must not hold the writes above
        # past gunicorn's graceful_timeout (drain_timeout_secs + 10), whose SIGKILL cuts them.
        self._close_agents()
        return interrupted

    def _close_agents(self) -> None:
        """End what the agents still run, as the door's close does: each agent with a
        ``close`` (a harness's: SIGTERM to its processes, SIGKILL after its
        ``cancel_grace_secs``) is closed, all at once, each in a thread of its own, and
        waited for until the longest grace and the reaping after it have passed.

        NOTE: without it an embedded hub's close returns while its harnesses run on (one
        that ignores SIGTERM lived 3 s past it); gunicorn's worker waits for them only
        because its exit does."""
        closing = [(key, agent) for key, agent in self.agents.items()
                   if callable(getattr(agent, "close", None))]
        if not closing:
            return
        threads = [threading.Thread(target=_close_agent, args=(key, agent), daemon=True,
                                    name=f"close-agent-{key[0]}-{key[1]}")
                   for key, agent in closing]
        for thread in threads:
            thread.start()
        grace = max(float(getattr(agent, "cancel_grace", 0) or 0) for _, agent in closing)
        deadline = time.monotonic() + grace + REAP_SECS + 1
        for (key, _), thread in zip(closing, threads):
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                logger.error("shutdown: agent %s/%s did not close in time", *key)


def _close_agent(key: tuple, agent) -> None:
    try:
        agent.close()
    except Exception:  # noqa: BLE001 - an agent's close is its code: the hub still closes
        logger.exception("shutdown: closing agent %s/%s failed; the hub closes all the same",
                         *key)


def create_hub(config) -> Hub:
    """Build a hub from a HubConfig, a mapping, or a path to ``hub.yaml``.

    Raises:
        ConfigError: the configuration cannot be served (one line naming the key).
    """
    if isinstance(config, str):
        config = load_config_file(config)
    else:
        config = load_config(config)
    return Hub(config)
