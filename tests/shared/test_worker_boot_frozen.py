"""The worker's boot objects are frozen out of the cyclic GC's walks, its garbage collected first.

Run in a child process: the collector's permanent generation is the process's.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import gc
    import json
    import weakref

    from murmur_wsgi.serving.worker import DeadlineWorker, frozen_boot

    class Node:
        pass

    kept, garbage = Node(), Node()
    garbage.self = garbage                      # a cycle only the collector frees
    gone = weakref.ref(garbage)
    del garbage
    gc.disable()                                # no collection but frozen_boot's
    frozen_boot()
    print(json.dumps({"garbage_kept": gone() is not None,
                      "kept_frozen": gc.get_freeze_count() > 0 and kept not in gc.get_objects(),
                      "named": "frozen_boot" in DeadlineWorker.run.__code__.co_names}))
""")


def test_the_boot_is_frozen_after_its_garbage_is_collected():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"garbage_kept": False, "kept_frozen": True,
                                       "named": True}
