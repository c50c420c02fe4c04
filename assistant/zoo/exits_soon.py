"""Error-path helper: a Python process (and, with ``--child``, one child) that exits when told to.

For tests of a target that disappears while it is being inspected: the test decides the moment,
so the outcome never depends on timing luck. The process writes READY once it (and its child)
run, then waits; it exits 0 as soon as ``<workdir>/EXIT`` exists; the child exits as soon as
``<workdir>/EXIT-CHILD`` exists. py-spy while it waits, MainThread idle::

    wait_for (exits_soon.py)
    main (exits_soon.py)
    <module> (exits_soon.py)
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import _common


def wait_for(name: str) -> None:
    trigger = _common.workdir() / name
    while not trigger.exists():
        time.sleep(0.01)


def main() -> None:
    if "--is-child" in sys.argv:
        wait_for("EXIT-CHILD")
        return
    child = None
    if "--child" in sys.argv:
        child = subprocess.Popen([sys.executable, __file__, "--is-child"])
        threading.Thread(target=child.wait, daemon=True).start()  # reaped at once: gone, not a zombie
        _common.mark_ready(child=child.pid)
    else:
        _common.mark_ready()
    wait_for("EXIT")
    print("exiting", flush=True)


if __name__ == "__main__":
    main()
