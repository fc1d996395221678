"""What a bench run records about itself: package versions and the commit measured."""
from __future__ import annotations

import contextlib
import json
import subprocess
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def versions(dists=("gunicorn", "gevent", "greenlet", "werkzeug", "murmur-wsgi")) -> dict:
    """The installed version of each distribution that is installed."""
    found = {}
    for dist in dists:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[dist] = metadata.version(dist)
    return found


def git_commit() -> str | None:
    """The short commit of the checkout, ``-dirty`` when tracked files changed."""
    with contextlib.suppress(OSError):
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True,
                              capture_output=True, check=False).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, text=True, capture_output=True,
                               check=False).stdout.strip()
        return f"{head}{'-dirty' if dirty else ''}" if head else None
    return None


def save(report: dict, name: str, log) -> None:
    """Write a run's report to ``bench/results/<name>.json`` and say where."""
    results = REPO / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    out = results / f"{name}.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {out.relative_to(REPO)}")
