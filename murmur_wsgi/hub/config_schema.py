"""hub.yaml's schema: every block's fields, their defaults and their checks.

``HubSchema`` reads the whole file (``hub/config.py`` loads it, after the
environment's overlay, ``hub/config_env.py``); a refusal names its key in one
line (``ConfigError``).
"""
from __future__ import annotations

import logging
import re

from marshmallow import ValidationError, fields, validate, validates_schema

from murmur_wsgi.agents.output import MAX_OUTPUT_BYTES, MIN_OUTPUT_BYTES, OUTPUT_FLOOR_ERROR
from murmur_wsgi.agents.spec import AgentField
from murmur_wsgi.hub.config_fields import Callable, MountPath, PublicUrl
from murmur_wsgi.hub.config_store_url import RedisUrl, StoreField
from murmur_wsgi.hub.store.large_reads import MAX_BYTES as MAX_ANSWER_BYTES
from murmur_wsgi.settings import (AsciiFloat, Block, ManifestError, Seconds, Size, StrictBool,
                                  StrictInt)

logger = logging.getLogger(__name__)

# NOTE: \Z, not $ (which matches before a final newline), as in config_fields.py.
DIGEST = re.compile(r"^[0-9a-f]{64}\Z")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
JWT_ALGORITHMS = ("HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384",
                  "ES512", "PS256", "PS384", "PS512", "EdDSA")


class ConfigError(ManifestError):
    """A hub.yaml that cannot be served; ``str()`` is the one line to print."""


def _positive(**kwargs):
    return Seconds(validate=validate.Range(min=0, min_inclusive=False), **kwargs)


MIN_ID_BYTES = 64               # limits.max_id_bytes holds the hub's own ids (36 bytes) and more


class LimitsSchema(Block):
    concurrency = StrictInt(load_default=4, validate=validate.Range(min=1))
    rate_per_minute = StrictInt(load_default=120, validate=validate.Range(min=1))
    run_timeout_secs = _positive(load_default=300.0)
    max_subscriptions = StrictInt(load_default=20, validate=validate.Range(min=1))
    max_body_bytes = Size(load_default=1024 ** 2)
    # The body's JSON and the message's parts, bounded before the work each bounds (as the
    # door's limits of the same names). NOTE: a SendMessage's parts sit at depth 5 and the
    # smallest holds 11 values.
    max_json_depth = StrictInt(load_default=64, validate=validate.Range(min=5))
    max_json_values = StrictInt(load_default=1_000_000, validate=validate.Range(min=11))
    max_parts = StrictInt(load_default=1_000, validate=validate.Range(min=1))
    data_text_bytes = Size(load_default=16 * 1024 ** 2)
    # A connection's read deadlines (the worker's, per connection: no tenant override).
    header_timeout_secs = _positive(load_default=10.0)    # accept (or first byte) to headers' end
    body_timeout_secs = _positive(load_default=30.0)      # headers' end to the body's end
    max_id_bytes = StrictInt(load_default=256, validate=validate.Range(min=MIN_ID_BYTES))
    # What one run's agent writes (streamed text, progress, artifacts): the run keeps it and
    # the store's event log holds it until the task ends (hub/runs.py).
    max_output_bytes = Size(load_default=MAX_OUTPUT_BYTES, validate=validate.Range(
        min=MIN_OUTPUT_BYTES, error=OUTPUT_FLOOR_ERROR))
    # The models one run's usage names (each kept, and priced, until the run ends).
    max_usage_models = StrictInt(load_default=1_000, validate=validate.Range(min=1))
    # The stored bytes of a context's earlier tasks read for a run's ctx.history, newest first.
    history_bytes = Size(load_default=4 * 1024 ** 2)
    # The stored bytes of the tasks one ListTasks page reads and answers, newest first.
    list_bytes = Size(load_default=16 * 1024 ** 2)
    # Large answers of a request's own (hub/held.py) held for clients still reading them:
    # a tenant's on one worker, and every tenant's together (the worker's: no override).
    answer_bytes = Size(load_default=128 * 1024 ** 2)
    worker_answer_bytes = Size(load_default=MAX_ANSWER_BYTES)


class TenantLimitsSchema(Block):
    """A tenant's overrides: every key optional, the top-level limits fill the rest."""

    concurrency = StrictInt(validate=validate.Range(min=1))
    rate_per_minute = StrictInt(validate=validate.Range(min=1))
    run_timeout_secs = _positive()
    max_subscriptions = StrictInt(validate=validate.Range(min=1))
    max_body_bytes = Size()
    max_json_depth = StrictInt(validate=validate.Range(min=5))
    max_json_values = StrictInt(validate=validate.Range(min=11))
    max_parts = StrictInt(validate=validate.Range(min=1))
    data_text_bytes = Size()
    max_id_bytes = StrictInt(validate=validate.Range(min=MIN_ID_BYTES))
    max_output_bytes = Size(validate=validate.Range(min=MIN_OUTPUT_BYTES,
                                                    error=OUTPUT_FLOOR_ERROR))
    max_usage_models = StrictInt(validate=validate.Range(min=1))
    history_bytes = Size()
    list_bytes = Size()
    answer_bytes = Size()


class TasksSchema(Block):
    """Retention of finished tasks (store/retention.py)."""

    retention_secs = _positive(load_default=7 * 86_400.0)
    max_per_tenant = StrictInt(load_default=100_000, validate=validate.Range(min=1))
    max_bytes_per_tenant = Size(load_default=1024 ** 3)


class TenantTasksSchema(Block):
    """A tenant's overrides of ``tasks``: every key optional."""

    retention_secs = _positive()
    max_per_tenant = StrictInt(validate=validate.Range(min=1))
    max_bytes_per_tenant = Size()


class EventsSchema(Block):
    retention_secs = _positive(load_default=86_400.0)
    merge_secs = _positive(load_default=0.25)


class RedisSchema(Block):
    """The Redis store's settings (``store: redis://…``, or ``store: redis`` and ``url``)."""

    url = RedisUrl(load_default=None, allow_none=True)
    timeout_secs = Seconds(load_default=5.0, validate=validate.Range(min=0.05))
    liveness_secs = Seconds(load_default=10.0, validate=validate.Range(min=0.2))
    sweep_interval_secs = _positive(load_default=5.0)
    max_events_per_task = StrictInt(load_default=10_000, validate=validate.Range(min=100))
    # Each acknowledged write waits for this many replicas (WAIT), within timeout_secs.
    wait_replicas = StrictInt(load_default=0, validate=validate.Range(min=0))
    # Each of a worker's two pools' connections in use at once (per primary on a cluster;
    # the event listener holds one of redis-py's): one more call waits up to timeout_secs.
    max_connections = StrictInt(load_default=64, validate=validate.Range(min=2))


class MetricsSchema(Block):
    enabled = StrictBool(load_default=False)


class StreamSchema(Block):
    keepalive_secs = _positive(load_default=15.0)
    write_timeout_secs = _positive(load_default=10.0)
    # What a SendStreamingMessage reader may fall behind before it is lagged (hub/live.py).
    live_backlog_bytes = Size(load_default=8 * 1024 ** 2, validate=validate.Range(min=64 * 1024))


class JwtSchema(Block):
    secret = fields.String(load_default=None, allow_none=True, validate=validate.Length(min=1))
    public_key = fields.String(load_default=None, allow_none=True,
                               validate=validate.Length(min=1))
    algorithms = fields.List(fields.String(validate=validate.OneOf(JWT_ALGORITHMS)),
                             load_default=None, allow_none=True)
    issuer = fields.String(load_default=None, allow_none=True)
    audience = fields.String(load_default=None, allow_none=True)
    leeway_secs = Seconds(load_default=0.0, validate=validate.Range(min=0))

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


class AuthSchema(Block):
    jwt = fields.Nested(JwtSchema, load_default=None, allow_none=True)


class PushSchema(Block):
    """``push``: off by default; the rules are push/settings.py's (one home)."""

    enabled = StrictBool(load_default=False)
    secret = fields.String(load_default=None, allow_none=True)
    ports = fields.List(StrictInt(validate=validate.Range(min=1, max=65535)),
                        load_default=lambda: [443], validate=validate.Length(min=1))
    allow_networks = fields.List(fields.String(), load_default=list)
    ca_file = fields.String(load_default=None, allow_none=True)
    retry_scale = AsciiFloat(load_default=1.0, validate=validate.Range(
        min=0, max=1, min_inclusive=False))

    @validates_schema
    def _rules(self, data, **kwargs):
        from murmur_wsgi.hub.push.settings import check_push

        check_push(data)


# Micro-credits per million tokens (a thousand credits a token): a run's most tokens
# (context.MAX_TOKENS, each count) at this price fit the usage part's 28 decimal digits.
MAX_PRICE = 1e15


class PriceSchema(Block):
    input = AsciiFloat(required=True, validate=validate.Range(min=0, max=MAX_PRICE))
    output = AsciiFloat(required=True, validate=validate.Range(min=0, max=MAX_PRICE))
    cached = AsciiFloat(load_default=None, allow_none=True,
                          validate=validate.Range(min=0, max=MAX_PRICE))


class SkillsField(fields.Field):
    """A list of mappings; an entry missing id, name or description is kept here, dropped
    from the card (cards.py)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list) or not all(isinstance(s, dict) for s in value):
            raise ValidationError("must be a list of {id, name, description, tags}")
        return value


class HostedAgentSchema(Block):
    agent = AgentField(required=True)
    publish = StrictBool(load_default=False)
    description = fields.String(load_default="")
    version = fields.String(load_default="1.0.0", validate=validate.Length(min=1))
    skills = SkillsField(load_default=list)


class TenantSchema(Block):
    api_keys = fields.List(fields.String(), load_default=list)
    limits = fields.Nested(TenantLimitsSchema, load_default=dict)
    tasks = fields.Nested(TenantTasksSchema, load_default=dict)
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


class HubSchema(Block):
    public_url = PublicUrl(load_default=None, allow_none=True)
    mount_path = MountPath(load_default="")
    store = StoreField(load_default="memory")
    redis = fields.Nested(RedisSchema, load_default=dict)
    metrics = fields.Nested(MetricsSchema, load_default=dict)
    drain_timeout_secs = Seconds(load_default=20.0, validate=validate.Range(min=0))
    sweep_max_age_secs = _positive(load_default=None, allow_none=True)
    cancel_timeout_secs = _positive(load_default=10.0)
    events = fields.Nested(EventsSchema, load_default=dict)
    tasks = fields.Nested(TasksSchema, load_default=dict)
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
