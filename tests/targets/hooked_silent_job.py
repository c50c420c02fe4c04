"""Target for test_watch: a job that logs nothing, reports its steps only through debug_stuck.hook
(a step every 0.1 s for --steps steps), then hangs waiting for a batch that never comes."""

from __future__ import annotations

import sys
import threading
import time

import debug_stuck.hook


def main() -> None:
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 40
    debug_stuck.hook.install()
    for step in range(1, steps + 1):
        time.sleep(0.1)
        debug_stuck.hook.step(step)
    threading.Event().wait()


if __name__ == "__main__":
    main()
