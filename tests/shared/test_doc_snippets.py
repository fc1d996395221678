"""The docs' snippets that a reader copies whole read as their tools read them."""
from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import textwrap
from pathlib import Path

import yaml

from murmur_wsgi.cli import build_parser
from murmur_wsgi.door.manifest import load_manifest
from murmur_wsgi.settings import ManifestError

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *REPO.glob("docs/*.md")])


def blocks(language: str):
    """Each fenced block of ``language`` in the docs: (its file and line, its text)."""
    fence = re.compile(r"^( *)```" + re.escape(language) + r"\n(.*?)^\1```", re.M | re.S)
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for found in fence.finditer(text):
            yield f"{path.name}:{text.count(chr(10), 0, found.start()) + 1}", found.group(2)


def test_systemd_units_carry_no_comment_after_a_value():
    """systemd reads a comment only on a line of its own: ``KillMode=mixed  # …`` is the
    value ``mixed  # …``, which it refuses (and ignores the setting)."""
    trailing = [f"{where}: {line.strip()}" for where, text in blocks("ini")
                for line in text.splitlines()
                if re.match(r"\s*[A-Za-z]+=", line) and re.search(r"\s[#;]", line)]
    assert trailing == []


def test_make_targets_take_their_options_as_variables():
    """``make bench -r 3`` hands ``-r`` to make (no built-in rules) and asks it for a target
    ``3``; the bench targets take their options in a variable (``BENCH_ARGS="-r 3"``)."""
    flagged = [f"{path.name}: {found.group(0)}" for path in DOCS
               for found in re.finditer(r"`make [\w-]+\s+-[^`]*`",
                                        path.read_text(encoding="utf-8"))]
    assert flagged == []


def test_nginx_sites_on_tls_name_their_certificate():
    """nginx refuses a ``listen … ssl`` without a certificate: ``no "ssl_certificate" is
    defined for the "listen ... ssl" directive``."""
    bare = [where for where, text in blocks("nginx")
            if re.search(r"^\s*listen [^;]*\bssl\b", text, re.M)
            and not ("ssl_certificate " in text and "ssl_certificate_key " in text)]
    assert bare == []


def test_python_snippets_compile():
    """Each Python block compiles as a module (an ``async with`` outside a coroutine does
    not: a reader pasting it gets a SyntaxError)."""
    refused = []
    for where, text in blocks("python"):
        try:
            compile(textwrap.dedent(text), where, "exec")
        except SyntaxError as ex:
            refused.append(f"{where}: {ex.msg}")
    assert refused == []


def test_manifests_load():
    """Each YAML block naming a door (its ``name`` and ``version``) is a manifest the door
    reads: an abbreviation such as ``stream: {...}`` is a key it refuses (exit 2)."""
    refused = []
    for where, text in blocks("yaml"):
        manifest = yaml.safe_load(textwrap.dedent(text))
        if isinstance(manifest, dict) and {"name", "version"} <= manifest.keys():
            try:
                load_manifest(manifest)
            except ManifestError as ex:
                refused.append(f"{where}: {ex}")
    assert refused == []


def test_murmur_wsgi_commands_parse():
    """Each ``murmur-wsgi`` command of a shell block names a command and options the command
    line takes (placeholder lines, ``[--listen HOST:PORT]``, left out)."""
    parser = build_parser()
    refused = []
    for where, text in blocks("sh"):
        for line in re.sub(r"\\\n\s*", " ", text).splitlines():
            line = re.sub(r"\s+#.*$", "", line.strip().removeprefix("$ ")).rstrip("& ")
            words = shlex.split(line) if "murmur-wsgi " in line and "[" not in line else []
            while words and not words[0].endswith("murmur-wsgi"):
                words.pop(0)                      # VAR=value before the command
            if words:
                try:
                    with contextlib.redirect_stderr(io.StringIO()):
                        parser.parse_args(words[1:])
                except SystemExit:
                    refused.append(f"{where}: {line}")
    assert refused == []


def test_json_blocks_are_json():
    """Each JSON block is a JSON text a reader can send or compare as it is."""
    refused = []
    for where, text in blocks("json"):
        try:
            json.loads(text)
        except ValueError as ex:
            refused.append(f"{where}: {ex}")
    assert refused == []
