"""What the door's manifest and the hub's config both load: YAML files and ``pkg.mod:callable``.

Each failure is raised as the caller's own error class with one line, so a bad
file or spec exits 2 naming what was wrong, the same way for both applications.
"""
from __future__ import annotations

import importlib
import os
import stat
import sys

import yaml


class SafeLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, whose constructors' own errors are ``ConstructorError``s (a
    ``yaml.YAMLError``, with the value's line): they call ``int()``, ``date()``, … and let
    ValueError out (``x: 2024-02-30``, an int of more than 4,300 digits, ``!!int abc``),
    IndexError (``!!int ''``), KeyError (``!!bool maybe``) or AttributeError."""

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, AttributeError) as ex:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read this value ({type(ex).__name__})",
                node.start_mark) from None


def safe_load(stream):
    """``yaml.safe_load``, every failure to read a value a ``yaml.YAMLError``."""
    return yaml.load(stream, Loader=SafeLoader)


def import_callable(spec: str, where: str, error: type[Exception]):
    """Import ``pkg.mod:callable``; a bad spec raises ``error`` naming ``where``."""
    module_name, _, attr = spec.partition(":")
    try:
        target = _import_module(module_name)
    except ImportError as ex:
        raise error(f"{where}: cannot import {module_name}: {ex}") from None
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise error(f"{where}: {module_name} has no {attr}")
    if not callable(target):
        raise error(f"{where}: {spec} is not callable")
    return target


def _import_module(name: str):
    """Import ``name`` from ``sys.path``, or else from the current directory.

    gunicorn and ``python -m`` put the directory the process was started in on
    ``sys.path``; ``flask run`` with an app file elsewhere, or a console script,
    do not. A module found in neither is missing: the cwd is appended (after
    every installed package, so it shadows none) only when the module's own top
    package is what was not found, never for a missing dependency inside it.
    """
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as ex:
        top = name.split(".")[0]
        cwd = os.getcwd()
        if ex.name != top or cwd in sys.path or "" in sys.path:
            raise
        sys.path.append(cwd)
        importlib.invalidate_caches()
        return importlib.import_module(name)


def read_yaml(path: str, error: type[Exception]):
    """The YAML document at ``path``; unreadable, not a regular file, not UTF-8, not
    YAML or nested past the parser's recursion raises ``error``.

    The file is opened without blocking and checked before it is read: a FIFO no one
    writes would hold the command for good, a device (``/dev/zero``) never ends.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            # NOTE: checked before open() takes the descriptor: open() refuses a directory
            # itself (EISDIR) without closing a descriptor it was given.
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise error(f"{path}: is not a regular file")
            fh = open(fd, encoding="utf-8", closefd=True)
        except BaseException:
            os.close(fd)
            raise
        with fh:
            return safe_load(fh)
    except OSError as ex:
        raise error(f"{path}: cannot be read: {ex.strerror}") from None
    except UnicodeDecodeError as ex:
        raise error(f"{path}: is not UTF-8 text (byte {ex.start})") from None
    except RecursionError:
        raise error(f"{path}: nests too deeply to be read") from None
    except yaml.YAMLError as ex:
        mark = getattr(ex, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise error(f"{path}: is not valid YAML{where}") from None
