"""Every file path the docs, README, conf comments and the package's docstrings and comments
name is in the tree.

A mention with a folder (``serving/envelope.py``, ``murmur_wsgi/door/worker.py``) is the
path from the repository's root, from ``murmur_wsgi/`` or ``tests/``, or the end of one
(the door's pages name ``middleware/body.py`` under ``murmur_wsgi/door/``); a bare
``name.py`` is some file of that name. ``murmur_wsgi/…`` must be exact. Names of other
projects' files and of files a command writes are listed in ``ELSEWHERE``.
"""
from __future__ import annotations

import io
import os
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".git", ".venv", "__pycache__", "node_modules", ".hypothesis"}
MENTION = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.(?:py|md|yaml|sh))(?![\w/])")
ELSEWHERE = {
    "a2a/server/events/event_consumer.py",      # a2a-sdk's
    "prometheus.yml", "upper.yaml",             # files a reader writes
}


def _tree() -> tuple[set[str], set[str]]:
    files: set[str] = set()
    for root, dirs, names in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        rel = Path(root).relative_to(REPO).as_posix()
        files.update(name if rel == "." else f"{rel}/{name}" for name in names)
    return files, {f.rsplit("/", 1)[-1] for f in files}


def _python_prose(path: Path) -> str:
    """A module's comments and string literals (its docstrings among them)."""
    pieces = []
    with open(path, encoding="utf-8") as fh:
        for token in tokenize.generate_tokens(io.StringIO(fh.read()).readline):
            if token.type in (tokenize.COMMENT, tokenize.STRING):
                pieces.append(token.string)
    return "\n".join(pieces)


def _texts():
    for path in sorted([*REPO.glob("docs/*.md"), REPO / "README.md", *REPO.glob("conf/*")]):
        if path.suffix == ".py":
            yield path, _python_prose(path)
        elif path.is_file():
            yield path, path.read_text(encoding="utf-8")
    for path in sorted((REPO / "murmur_wsgi").rglob("*.py")):
        yield path, _python_prose(path)


def _exists(mention: str, files: set[str], names: set[str]) -> bool:
    if mention in ELSEWHERE:
        return True
    if "/" not in mention:
        return mention in names
    if mention.startswith("murmur_wsgi/"):
        return mention in files
    return (any(root + mention in files for root in ("", "murmur_wsgi/", "tests/"))
            or any(f.endswith("/" + mention) for f in files))


def test_every_path_named_is_in_the_tree():
    files, names = _tree()
    missing = []
    for path, text in _texts():
        for mention in MENTION.findall(text):
            if not _exists(mention, files, names):
                missing.append(f"{path.relative_to(REPO)}: {mention}")
    assert missing == []
