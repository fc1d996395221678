"""The environment's settings of hub.yaml: ``MURMUR_HUB_`` + a setting's dotted path.

Every setting outside ``tenants`` and ``pricing`` is read from the variable named
for its path in upper case with ``_`` for dots (``limits.run_timeout_secs`` →
``MURMUR_HUB_LIMITS_RUN_TIMEOUT_SECS``); ``MURMUR_HUB_TENANTS`` and
``MURMUR_HUB_PRICING`` take a whole block as YAML or JSON. The variable wins over
the file, and a refusal of its value names the variable.
"""
from __future__ import annotations

import functools
import logging
import os
from typing import Any

import yaml
from marshmallow import Schema, fields

from murmur_wsgi.hub.config_fields import Callable, PublicUrl
from murmur_wsgi.hub.config_schema import ConfigError, HubSchema
from murmur_wsgi.loading import safe_load

logger = logging.getLogger(__name__)

ENV_PREFIX = "MURMUR_HUB_"


@functools.cache
def env_settings() -> tuple[tuple[str, tuple, Any], ...]:
    """Every setting the environment can set: ``(variable, path, field)`` (the schema's,
    which does not change: read once)."""
    return tuple(_settings(HubSchema(), ()))


def _settings(schema: Schema, path: tuple) -> list[tuple[str, tuple, Any]]:
    out = []
    for name, fld in schema.fields.items():
        key = path + (fld.data_key or name,)
        if isinstance(fld, fields.Nested):
            out.extend(_settings(fld.schema, key))
        else:
            out.append((ENV_PREFIX + "_".join(key).upper(), key, fld))
    return out


def _env_value(variable: str, raw: str, fld) -> Any:
    if isinstance(fld, (fields.String, PublicUrl)) and not isinstance(fld, Callable):
        return raw
    try:
        if isinstance(fld, fields.List) and not raw.lstrip().startswith("["):
            return [safe_load(item.strip()) for item in raw.split(",") if item.strip()]
        return safe_load(raw)
    except (yaml.YAMLError, RecursionError):      # as read_yaml: nested past the parser's
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


def env_named(line: str, origin: dict) -> str:
    """Name the variable when the refused key came from the environment."""
    for path, variable in origin.items():
        dotted = ".".join(path)
        if line == dotted or line.startswith(dotted + ":") or line.startswith(dotted + "."):
            return f"{variable} ({line.split(':', 1)[0]}):{line.split(':', 1)[1]}" \
                if ":" in line else f"{variable}: {line}"
    return line
