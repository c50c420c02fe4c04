"""Error-path helper: a Python process that writes READY at once, sleeps 1.5 s, then exits 0.

For tests of a target that disappears while it is being inspected (exit code 3, "gone").
py-spy while it lives, MainThread idle::

    main (exits_soon.py)
    <module> (exits_soon.py)
"""

from __future__ import annotations

import time

import _common


def main() -> None:
    _common.mark_ready(lifetime=1.5)
    time.sleep(1.5)
    print("exiting", flush=True)


if __name__ == "__main__":
    main()
