"""Target for test_watch: a job that logs nothing and reports its steps only through
debug_stuck.hook (a step every 0.1 s) until the file given by --stop-file exists, then hangs
waiting for a batch that never comes."""

from __future__ import annotations

import os
import sys
import threading
import time

import debug_stuck.hook


def main() -> None:
    stop = sys.argv[sys.argv.index("--stop-file") + 1]
    debug_stuck.hook.install()
    step = 0
    while not os.path.exists(stop):
        time.sleep(0.1)
        step += 1
        debug_stuck.hook.step(step)
    threading.Event().wait()


if __name__ == "__main__":
    main()
