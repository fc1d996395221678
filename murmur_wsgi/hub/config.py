"""The hub's configuration, ``hub.yaml``: its schema, defaults, environment and loading.

Every setting outside ``tenants`` and ``pricing`` is also read from the
environment variable ``MURMUR_HUB_`` + its dotted path in upper case with
``_`` for dots (``limits.run_timeout_secs`` → ``MURMUR_HUB_LIMITS_RUN_TIMEOUT_SECS``);
``MURMUR_HUB_TENANTS`` and ``MURMUR_HUB_PRICING`` take a whole block as YAML
or JSON. The variable wins over the file. A bad value stops the process with
one line naming the key (``ConfigError``), exit 2, like the door's manifest.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml
from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from murmur_wsgi.loading import read_yaml
from murmur_wsgi.manifest import AgentField, ManifestError, Size, StrictInt, _Block, _first_error

logger = logging.getLogger(__name__)

ENV_PREFIX = "MURMUR_HUB_"
# The file ``murmur-wsgi hub`` hands to its gunicorn worker (not a setting: no key has that path).
CONFIG_ENV = "MURMUR_HUB_CONFIG_FILE"
DIGEST = re.compile(r"^[0-9a-f]{64}$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
CALLABLE = re.compile(r"^[\w.]+:[\w.]+$")
JWT_ALGORITHMS = ("HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384",
                  "ES512", "PS256", "PS384", "PS512", "EdDSA")


class ConfigError(ManifestError):
    """A hub.yaml that cannot be served; ``str()`` is the one line to print."""


def _positive(**kwargs):
    return fields.Float(validate=validate.Range(min=0, min_inclusive=False), **kwargs)


class PublicUrl(fields.Field):
    """http or https, a host (and port) only: no path, query, fragment or credentials."""

    def _deserialize(self, value, attr, data, **kwargs):
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValidationError("must be an http or https URL")
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError:
            raise ValidationError(f"'{value}' is not a URL") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError(f"'{value}' must be http:// or https:// and a host")
        if parts.path not in ("", "/") or parts.query or parts.fragment or "?" in value \
                or "#" in value:
            raise ValidationError(f"'{value}' must be a host only: no path, query or fragment")
        if parts.username is not None or parts.password is not None:
            raise ValidationError(f"'{value}' must not carry credentials")
        del port
        return value.rstrip("/")


class Callable(fields.String):
    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if not CALLABLE.match(value):
            raise ValidationError('must be "pkg.module:callable"')
        return value


class LimitsSchema(_Block):
    concurrency = StrictInt(load_default=4, validate=validate.Range(min=1))
    rate_per_minute = StrictInt(load_default=120, validate=validate.Range(min=1))
    run_timeout_secs = _positive(load_default=300.0)
    max_subscriptions = StrictInt(load_default=20, validate=validate.Range(min=1))
    max_body_bytes = Size(load_default=1024 ** 2)


class TenantLimitsSchema(_Block):
    """A tenant's overrides: every key optional, the top-level limits fill the rest."""

    concurrency = StrictInt(validate=validate.Range(min=1))
    rate_per_minute = StrictInt(validate=validate.Range(min=1))
    run_timeout_secs = _positive()
    max_subscriptions = StrictInt(validate=validate.Range(min=1))
    max_body_bytes = Size()


class EventsSchema(_Block):
    retention_secs = _positive(load_default=86_400.0)
    merge_secs = _positive(load_default=0.25)


class StoreField(fields.String):
    """``memory``, ``redis`` (the URL is ``redis.url``) or a ``redis://``/``rediss://`` URL."""

    def _deserialize(self, value, attr, data, **kwargs):
        value = super()._deserialize(value, attr, data, **kwargs)
        if value in ("memory", "redis"):
            return value
        _redis_url(value)
        return value


def _redis_url(value: str) -> str:
    """Check a Redis URL (never echoing it: it may carry a password)."""
    try:
        parts = urlsplit(value)
        parts.port
    except ValueError:
        raise ValidationError("is not a redis:// or rediss:// URL") from None
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ValidationError("must be memory, redis, or a redis://host:port/db or "
                              "rediss:// URL")
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise ValidationError("a Redis URL's path is its database number (redis://host:port/0)")
    return value


class RedisUrl(fields.String):
    def _deserialize(self, value, attr, data, **kwargs):
        if value is None or value == "":
            return None
        return _redis_url(super()._deserialize(value, attr, data, **kwargs))


class RedisSchema(_Block):
    """The Redis store's settings (``store: redis://…``, or ``store: redis`` and ``url``)."""

    url = RedisUrl(load_default=None, allow_none=True)
    timeout_secs = fields.Float(load_default=5.0, validate=validate.Range(min=0.05))
    liveness_secs = fields.Float(load_default=10.0, validate=validate.Range(min=0.2))
    sweep_interval_secs = _positive(load_default=5.0)
    max_events_per_task = StrictInt(load_default=10_000, validate=validate.Range(min=100))


class MetricsSchema(_Block):
    enabled = fields.Boolean(load_default=False, truthy={True}, falsy={False})


class StreamSchema(_Block):
    keepalive_secs = _positive(load_default=15.0)
    write_timeout_secs = _positive(load_default=10.0)


class JwtSchema(_Block):
    secret = fields.String(load_default=None, allow_none=True, validate=validate.Length(min=1))
    public_key = fields.String(load_default=None, allow_none=True,
                               validate=validate.Length(min=1))
    algorithms = fields.List(fields.String(validate=validate.OneOf(JWT_ALGORITHMS)),
                             load_default=None, allow_none=True)
    issuer = fields.String(load_default=None, allow_none=True)
    audience = fields.String(load_default=None, allow_none=True)
    leeway_secs = fields.Float(load_default=0.0, validate=validate.Range(min=0))

    @validates_schema
    def _key(self, data, **kwargs):
        secret, public = data.get("secret"), data.get("public_key")
        if bool(secret) == bool(public):
            raise ValidationError("set exactly one of secret (HS256) and public_key "
                                  "(a PEM, RS256/ES256)", "secret")
        algorithms = data.get("algorithms")
        if algorithms is not None:
            if not algorithms:
                raise ValidationError("must list at least one algorithm", "algorithms")
            family = ("HS",) if secret else ("RS", "ES", "PS", "Ed")
            wrong = [a for a in algorithms if not a.startswith(family)]
            if wrong:
                what = "secret" if secret else "public_key"
                raise ValidationError(f"'{wrong[0]}' does not verify with a {what}",
                                      "algorithms")


class AuthSchema(_Block):
    jwt = fields.Nested(JwtSchema, load_default=None, allow_none=True)


class PushSchema(_Block):
    """``push``: off by default; the rules are push/settings.py's (one home)."""

    enabled = fields.Boolean(load_default=False, truthy={True}, falsy={False})
    secret = fields.String(load_default=None, allow_none=True)
    ports = fields.List(StrictInt(validate=validate.Range(min=1, max=65535)),
                        load_default=lambda: [443], validate=validate.Length(min=1))
    allow_networks = fields.List(fields.String(), load_default=list)
    ca_file = fields.String(load_default=None, allow_none=True)
    retry_scale = fields.Float(load_default=1.0, validate=validate.Range(
        min=0, max=1, min_inclusive=False))

    @validates_schema
    def _rules(self, data, **kwargs):
        from murmur_wsgi.hub.push.settings import check_push

        check_push(data)


class PriceSchema(_Block):
    input = fields.Float(required=True, validate=validate.Range(min=0))
    output = fields.Float(required=True, validate=validate.Range(min=0))
    cached = fields.Float(load_default=None, allow_none=True, validate=validate.Range(min=0))


class SkillsField(fields.Field):
    """A list of mappings; an entry missing id, name or description is kept here, dropped
    from the card (cards.py)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list) or not all(isinstance(s, dict) for s in value):
            raise ValidationError("must be a list of {id, name, description, tags}")
        return value


class HostedAgentSchema(_Block):
    agent = AgentField(required=True)
    publish = fields.Boolean(load_default=False, truthy={True}, falsy={False})
    description = fields.String(load_default="")
    version = fields.String(load_default="1.0.0", validate=validate.Length(min=1))
    skills = SkillsField(load_default=list)


class TenantSchema(_Block):
    api_keys = fields.List(fields.String(), load_default=list)
    limits = fields.Nested(TenantLimitsSchema, load_default=dict)
    admission = Callable(load_default=None, allow_none=True)
    agents = fields.Dict(keys=fields.String(), values=fields.Nested(HostedAgentSchema),
                         load_default=dict)

    @validates_schema
    def _keys(self, data, **kwargs):
        for i, digest in enumerate(data.get("api_keys", [])):
            if not DIGEST.match(digest):
                raise ValidationError({i: ["must be the SHA-256 hex digest of a key (64 "
                                           "lowercase hex digits), never the key"]}, "api_keys")
        for name in data.get("agents", {}):
            if not NAME.match(name):
                raise ValidationError({name: ["is not an agent name: letters, digits, . _ -"]},
                                      "agents")


class HubSchema(_Block):
    public_url = PublicUrl(load_default=None, allow_none=True)
    store = StoreField(load_default="memory")
    redis = fields.Nested(RedisSchema, load_default=dict)
    metrics = fields.Nested(MetricsSchema, load_default=dict)
    drain_timeout_secs = fields.Float(load_default=20.0, validate=validate.Range(min=0))
    sweep_max_age_secs = _positive(load_default=None, allow_none=True)
    cancel_timeout_secs = _positive(load_default=10.0)
    events = fields.Nested(EventsSchema, load_default=dict)
    stream = fields.Nested(StreamSchema, load_default=dict)
    auth = fields.Nested(AuthSchema, load_default=dict)
    limits = fields.Nested(LimitsSchema, load_default=dict)
    pricing = fields.Dict(keys=fields.String(), values=fields.Nested(PriceSchema),
                          load_default=dict)
    tenants = fields.Dict(keys=fields.String(), values=fields.Nested(TenantSchema),
                          load_default=dict)
    push = fields.Nested(PushSchema, load_default=dict)

    @validates_schema
    def _store(self, data, **kwargs):
        if data.get("store") == "redis" and not (data.get("redis") or {}).get("url"):
            raise ValidationError("redis needs redis.url (or MURMUR_HUB_REDIS_URL), or "
                                  "store: redis://host:port/db", "store")

    @validates_schema
    def _unique_keys(self, data, **kwargs):
        seen: dict[str, str] = {}
        for tenant, block in data.get("tenants", {}).items():
            if not NAME.match(tenant):
                raise ValidationError({tenant: ["is not a tenant name: letters, digits, . _ -"]},
                                      "tenants")
            for digest in block.get("api_keys", []):
                if digest in seen and seen[digest] != tenant:
                    raise ValidationError({tenant: {"api_keys": [
                        f"a key of tenant {seen[digest]} cannot belong to {tenant} too"]}},
                        "tenants")
                seen[digest] = tenant


@dataclass
class HubConfig:
    """A validated hub.yaml; nested blocks are plain dicts with defaults filled."""

    public_url: str | None
    store: str
    redis: dict
    metrics: dict
    drain_timeout_secs: float
    sweep_max_age_secs: float
    cancel_timeout_secs: float
    events: dict
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

    def store_url(self) -> str:
        """The Redis URL: ``redis.url`` (MURMUR_HUB_REDIS_URL) when set, else ``store``."""
        return self.redis.get("url") or self.store

    def tenant_limits(self, tenant: str) -> dict:
        """The top-level limits with the tenant's overrides."""
        return {**self.limits, **self.tenants[tenant]["limits"]}


# --- the environment -------------------------------------------------------



def env_settings(schema: Schema | None = None, path: tuple = ()) -> list[tuple[str, tuple, Any]]:
    """Every setting the environment can set: ``(variable, path, field)``."""
    schema = schema or HubSchema()
    out = []
    for name, fld in schema.fields.items():
        key = path + (fld.data_key or name,)
        if isinstance(fld, fields.Nested):
            out.extend(env_settings(fld.schema, key))
        else:
            out.append((ENV_PREFIX + "_".join(key).upper(), key, fld))
    return out


def _env_value(variable: str, raw: str, fld) -> Any:
    if isinstance(fld, fields.List) and not raw.lstrip().startswith("["):
        return [yaml.safe_load(item.strip()) for item in raw.split(",") if item.strip()]
    if isinstance(fld, (fields.String, PublicUrl)) and not isinstance(fld, Callable):
        return raw
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        raise ConfigError(f"{variable}: is not a valid value") from None


def apply_env(data: dict, environ=None) -> tuple[dict, dict]:
    """Overlay the environment's settings on ``data``; return it and {path: variable}."""
    environ = os.environ if environ is None else environ
    data = _copy(data)
    origin = {}
    for variable, path, fld in env_settings():
        if variable not in environ:
            continue
        value = _env_value(variable, environ[variable], fld)
        block = data
        for part in path[:-1]:
            nested = block.get(part)
            if not isinstance(nested, dict):
                nested = block[part] = {}
            block = nested
        block[path[-1]] = value
        origin[path] = variable
    return data, origin


def _copy(value):
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


def _env_named(line: str, origin: dict) -> str:
    """Name the variable when the refused key came from the environment."""
    for path, variable in origin.items():
        dotted = ".".join(path)
        if line == dotted or line.startswith(dotted + ":") or line.startswith(dotted + "."):
            return f"{variable} ({line.split(':', 1)[0]}):{line.split(':', 1)[1]}" \
                if ":" in line else f"{variable}: {line}"
    return line


# --- loading ---------------------------------------------------------------


def load_config(data, environ=None) -> HubConfig:
    """Validate a mapping (or pass a HubConfig through), environment first; raise ConfigError."""
    if isinstance(data, HubConfig):
        return data
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("hub.yaml must be a mapping of keys")
    data, origin = apply_env(data, environ)
    try:
        loaded = HubSchema().load(data)
    except ValidationError as ex:
        line = _first_error(ex.messages).replace("is not a key this door reads",
                                                 "is not a key this hub reads")
        raise ConfigError(_env_named(line, origin)) from None
    limits = loaded["limits"]
    floor = limits["run_timeout_secs"] + 60.0
    sweep = loaded["sweep_max_age_secs"]
    if sweep is None:
        loaded["sweep_max_age_secs"] = max(300.0, floor)
    elif sweep < floor:
        logger.warning("sweep_max_age_secs %g is below run_timeout_secs + 60 s; raised to %g",
                       sweep, floor)
        loaded["sweep_max_age_secs"] = floor
    if loaded["push"]["enabled"] and not loaded["public_url"]:
        raise ConfigError("public_url: is required when push.enabled is true (the "
                          "notifications' iss and the card's URL come from it)")
    return HubConfig(**loaded)


def load_config_file(path: str, environ=None) -> HubConfig:
    """Read and validate ``hub.yaml``; every failure is one line."""
    data = read_yaml(path, ConfigError)
    try:
        return load_config(data, environ)
    except ConfigError as ex:
        raise ConfigError(f"{path}: {ex}") from None
