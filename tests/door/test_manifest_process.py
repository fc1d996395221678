"""agent.process is read as a file system's bytes (surrogateescape: U+DC80 to
U+DCFF, one byte each that is not UTF-8); a surrogate outside them (a YAML escape such as
"\\ud800") is no byte a file system holds: loaded, it failed every task at the harness's
spawn (UnicodeEncodeError, logged with its traceback)."""
from __future__ import annotations

import sys

import pytest

from murmur_wsgi.door.manifest import ManifestError, load_manifest


def _manifest(arg: str) -> dict:
    return {"name": "p", "version": "0.1.0", "inference": {"transport": "process"},
            "agent": {"process": [sys.executable, "-c", "pass", arg]}}


@pytest.mark.parametrize("arg", ["x\ud800", "x\udbff", "x\udc7f"])
def test_a_process_argument_no_file_system_holds_is_refused_at_load(arg):
    with pytest.raises(ManifestError) as info:
        load_manifest(_manifest(arg))
    assert str(info.value).startswith("agent.process[3]: "), str(info.value)


@pytest.mark.parametrize("arg", ["x\udcff", "x\udc80", "plain"])
def test_a_process_argument_of_a_file_systems_bytes_loads(arg):
    assert load_manifest(_manifest(arg)).agent["process"][3] == arg
