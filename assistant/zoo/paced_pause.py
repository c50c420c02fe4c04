"""Hang: a fixed-rate loop paces each step with an interval timer and ``signal.pause()``; a timeout
helper used for one slow call arms ``signal.alarm(5)`` and disarms it with ``signal.alarm(0)``. alarm()
and setitimer() share one timer (alarm(2)), so the pacing tick is gone and pause() waits for ever (the
sixteenth hunt's j16: no cause, "Put the data on a local SSD")::

    signal.setitimer(signal.ITIMER_REAL, 0.2)
    ...
    signal.alarm(5); fetch(); signal.alarm(0)     # the timeout helper
    signal.pause()                                 # the tick never comes

READY (``{"pid"}``) once the main thread sleeps in pause().
"""

from __future__ import annotations

import os
import signal

import _common


def on_alarm(signum, frame) -> None:
    pass  # the tick only wakes pause()


def fetch_with_timeout() -> None:
    signal.alarm(5)  # the helper's own timeout...
    sum(range(1000))
    signal.alarm(0)  # ...disarmed: and with it the pacing tick


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, on_alarm)
    disarmed: list = []
    _common.ready_when(
        lambda: disarmed and _common.sleeping_steadily(os.getpid(), samples=8), lambda: {"pid": os.getpid()}
    )
    for step in range(1000):
        signal.setitimer(signal.ITIMER_REAL, 0.2)  # the next step starts in 0.2 s
        if step == 3:
            fetch_with_timeout()
            disarmed.append(step)
        _common.log(f"step {step}")
        signal.pause()  # wait for the tick
