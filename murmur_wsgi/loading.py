"""What the door's manifest and the hub's config both load: YAML files and ``pkg.mod:callable``.

Each failure is raised as the caller's own error class with one line, so a bad
file or spec exits 2 naming what was wrong, the same way for both applications.
"""
from __future__ import annotations

import importlib

import yaml


def import_callable(spec: str, where: str, error: type[Exception]):
    """Import ``pkg.mod:callable``; a bad spec raises ``error`` naming ``where``."""
    module_name, _, attr = spec.partition(":")
    try:
        target = importlib.import_module(module_name)
    except ImportError as ex:
        raise error(f"{where}: cannot import {module_name}: {ex}") from None
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise error(f"{where}: {module_name} has no {attr}")
    if not callable(target):
        raise error(f"{where}: {spec} is not callable")
    return target


def read_yaml(path: str, error: type[Exception]):
    """The YAML document at ``path``; unreadable, not UTF-8 or not YAML raises ``error``."""
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except OSError as ex:
        raise error(f"{path}: cannot be read: {ex.strerror}") from None
    except UnicodeDecodeError as ex:
        raise error(f"{path}: is not UTF-8 text (byte {ex.start})") from None
    except yaml.YAMLError as ex:
        mark = getattr(ex, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise error(f"{path}: is not valid YAML{where}") from None
