"""The hub's configuration, ``hub.yaml``: the validated ``HubConfig`` and its loading.

The schema is ``hub/config_schema.py``'s; the environment's settings
(``MURMUR_HUB_*``, which win over the file) are ``hub/config_env.py``'s. A bad
value stops the process with one line naming the key (``ConfigError``), exit 2,
like the door's manifest.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from marshmallow import ValidationError

from murmur_wsgi.hub.config_env import apply_env, env_named
from murmur_wsgi.hub.config_schema import ConfigError, HubSchema
from murmur_wsgi.loading import read_yaml
from murmur_wsgi.serving.urls import announced_url
from murmur_wsgi.settings import first_error, first_unencodable

logger = logging.getLogger(__name__)

# The settings read as bytes of any kind (push/settings.py: ``secret_bytes``): a master
# secret of random bytes in its variable is one.
AS_BYTES = frozenset({"push.secret"})

# The file ``murmur-wsgi hub`` hands to its gunicorn worker (not a setting: no key has that path).
CONFIG_ENV = "MURMUR_HUB_CONFIG_FILE"


@dataclass
class HubConfig:
    """A validated hub.yaml; nested blocks are plain dicts with defaults filled."""

    public_url: str | None
    mount_path: str
    store: str
    redis: dict
    metrics: dict
    drain_timeout_secs: float
    sweep_max_age_secs: float
    cancel_timeout_secs: float
    events: dict
    tasks: dict
    stream: dict
    auth: dict
    limits: dict
    pricing: dict
    tenants: dict
    push: dict

    @property
    def shared(self) -> bool:
        """The store is shared by processes (Redis): more than one worker may serve."""
        return self.store != "memory"

    @property
    def announced_url(self) -> str | None:
        """``public_url`` as the hub states it (its cards, push's ``iss``): a valid URL, an
        internationalized host in its ASCII form (IDNA: ``serving/urls.py``)."""
        return announced_url(self.public_url) if self.public_url else None

    def store_url(self) -> str:
        """The Redis URL: ``redis.url`` (MURMUR_HUB_REDIS_URL) when set, else ``store``."""
        return self.redis.get("url") or self.store

    def tenant_limits(self, tenant: str) -> dict:
        """The top-level limits with the tenant's overrides (read, never changed).

        PERF: merged once per tenant (a loaded config does not change): every request
        reads its tenant's."""
        return self._tenant_limits[tenant]

    @functools.cached_property
    def _tenant_limits(self) -> dict:
        return {tenant: {**self.limits, **block["limits"]}
                for tenant, block in self.tenants.items()}


# PERF: one schema for every load: a new one copies its fields and makes each nested
# schema again (half of a 3.8 ms create_hub); a load keeps no state on it.
_SCHEMA = HubSchema()


def load_config(data, environ=None) -> HubConfig:
    """Validate a mapping (or pass a HubConfig through), environment first; raise ConfigError."""
    if isinstance(data, HubConfig):
        return data
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("hub.yaml must be a mapping of keys")
    data, origin = apply_env(data, environ)
    data = _store_of_redis_url(data, origin)
    where = first_unencodable(data, AS_BYTES)
    if where is not None:
        raise ConfigError(env_named(
            f"{where}: holds a character that is not text (a lone surrogate: a YAML escape "
            "such as \\ud800, or a variable's bytes that are not UTF-8)", origin))
    try:
        loaded = _SCHEMA.load(data)
    except ValidationError as ex:
        line = first_error(ex.messages).replace("is not a key this door reads",
                                                 "is not a key this hub reads")
        raise ConfigError(env_named(line, origin)) from None
    floor = longest_run_timeout(loaded) + 60.0
    sweep = loaded["sweep_max_age_secs"]
    if sweep is None:
        loaded["sweep_max_age_secs"] = max(300.0, floor)
    elif sweep < floor:
        logger.warning("sweep_max_age_secs %g is below the longest run_timeout_secs + 60 s; "
                       "raised to %g", sweep, floor)
        loaded["sweep_max_age_secs"] = floor
    if loaded["push"]["enabled"] and not loaded["public_url"]:
        raise ConfigError("public_url: is required when push.enabled is true (the "
                          "notifications' iss and the card's URL come from it)")
    return HubConfig(**loaded)


def longest_run_timeout(loaded: dict) -> float:
    """The longest run any tenant may have: the top-level ``limits.run_timeout_secs`` or a
    tenant's own. The sweep ends a run older than ``sweep_max_age_secs`` whoever's it is, so
    its floor is this + 60 s: no run is swept while its run timeout allows it."""
    own = (block["limits"].get("run_timeout_secs") for block in loaded["tenants"].values())
    return max([loaded["limits"]["run_timeout_secs"], *(t for t in own if t is not None)])


def _named(path: tuple, origin: dict) -> str:
    """A setting as a refusal names it: its dotted key, and its variable when it came from one."""
    dotted = ".".join(path)
    return f"{origin[path]} ({dotted})" if path in origin else dotted


def _store_of_redis_url(data: dict, origin: dict) -> dict:
    """A Redis URL alone (``redis.url``, MURMUR_HUB_REDIS_URL) switches the store to Redis;
    ``store: memory`` beside it, or another Redis URL in ``store``, is a contradiction."""
    redis = data.get("redis")
    url = redis.get("url") if isinstance(redis, dict) else None
    if not url:
        return data
    store = data.get("store")
    if store is None:
        return {**data, "store": "redis"}
    if isinstance(store, str) and (store == "redis" or store == url):
        return data
    url_key = _named(("redis", "url"), origin)
    store_key = _named(("store",), origin)
    if store == "memory":
        raise ConfigError(f"{store_key}: memory contradicts {url_key}, which names a Redis "
                          "store: remove one of the two (a Redis URL alone serves on Redis)")
    raise ConfigError(f"{store_key}: names another store than {url_key}: keep one Redis URL "
                      "(or write store: redis beside redis.url)")


def load_config_file(path: str, environ=None) -> HubConfig:
    """Read and validate ``hub.yaml``; every failure is one line."""
    data = read_yaml(path, ConfigError)
    try:
        return load_config(data, environ)
    except ConfigError as ex:
        raise ConfigError(f"{path}: {ex}") from None
