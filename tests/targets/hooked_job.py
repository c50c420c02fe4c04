"""Target for test_permissions: a job that installs debug_stuck.hook, makes itself non-dumpable
(PR_SET_DUMPABLE 0: no ptrace by its own user, /proc/PID files owned by root), reports steps 0-4
as heartbeats, then hangs waiting for a batch that never comes. Prints "ready" when hung.
With `--no-hook` it does the same without the hook; with `--stay-dumpable` it leaves itself dumpable."""

from __future__ import annotations

import ctypes
import sys
import threading

PR_SET_DUMPABLE = 4


def wait_for_batch(event: threading.Event) -> None:
    event.wait()


def main() -> None:
    hooked = "--no-hook" not in sys.argv
    if hooked:
        import debug_stuck.hook

        debug_stuck.hook.install()
    if "--stay-dumpable" not in sys.argv:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    for step in range(5):
        if hooked:
            debug_stuck.hook.step(step)
    print("ready", flush=True)
    wait_for_batch(threading.Event())


if __name__ == "__main__":
    main()
