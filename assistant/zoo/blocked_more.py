"""More blocked waits, by scenario (``python blocked_more.py <scenario>``), as blocked_on.py's:

- ``child_prompt_pipe``: ``communicate()`` with a child script that asks y/N on the stdin it inherits,
  a pipe whose only writer (a ``sleep`` outside the job) never writes.
- ``prompt_piped``: the job asks a y/N question with ``input()``; its stdin is a pipe that its own child
  holds and never writes (a launch script's ``sleep infinity | torchrun ...`` line).
- ``notify_missed``: a ``prefetch`` thread notifies a Condition before the main thread waits on it with
  no predicate, then sleeps (its source paused); the main thread waits for ever.
- ``stale_build_lock``: ``torch.utils.cpp_extension.load`` of an extension whose build folder holds the
  ``lock`` a killed build left; the loader waits in ``FileBaton.wait``.
- ``slot_backoff``: ``while not os.path.exists(flag): time.sleep(delay); delay = min(delay * 1.5, 20)``:
  a wait with backoff for a scheduler's flag that has not come yet.

READY: ``{"pid", "scenario"?, "path"?, "peer_pid"?}``, written once the main thread sleeps in the
expected wait.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import _common
from blocked_on import _stdin_from_a_silent_child, ready_in


def child_prompt_pipe() -> None:
    """subprocess.run(capture_output=True) of a script that asks y/N on the stdin it inherits: the
    job's stdin is a pipe whose only writer is a process outside the job (a `sleep` left from its
    launch line), which never writes. The child waits in its read, the job in communicate()."""
    read_end, write_end = os.pipe()
    subprocess.run(["sh", "-c", "sleep 100000 &"], stdout=write_end)  # the writer: no child of the job
    os.close(write_end)
    os.dup2(read_end, 0)
    os.close(read_end)
    asks = "printf 'Remote checkpoint exists. Overwrite? [y/N] ' >&2; read ans; [ \"$ans\" = y ]"
    child = subprocess.Popen(["sh", "-c", asks], stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def waiting() -> bool:
        return _common.blocked_in(child.pid, None, ("anon_pipe_read", "pipe_read"), ("read",)) and (
            _common.sleeping_steadily(child.pid)
        )

    _common.ready_when(waiting, lambda: {"scenario": sys.argv[1], "peer_pid": child.pid})
    child.communicate()  # what subprocess.run(..., capture_output=True) does
    _common.sleep_forever()


def prompt_piped() -> None:
    """A y/N prompt whose stdin is a pipe this process's own child holds and never writes: what a
    launch script's `sleep infinity | torchrun ...` line gives its job (the script stands here)."""
    holder = _stdin_from_a_silent_child()
    ready_in("recv", peer_pid=holder.pid)
    input("run_out is not empty, overwrite? [y/N] ")
    _common.sleep_forever()


def notify_missed() -> None:
    """A prefetch thread notifies a Condition before the main thread waits on it (no predicate), then
    its source pauses: it sleeps, alive, and sends nothing more. The wait lasts for ever."""
    cond = threading.Condition()
    sent = threading.Event()

    def prefetch() -> None:
        with cond:
            cond.notify()  # nobody waits yet: the wakeup is lost
        sent.set()
        while True:
            time.sleep(3600)  # the stream paused

    threading.Thread(target=prefetch, name="prefetch", daemon=True).start()
    sent.wait()
    _common.ready_when(_common._main_sleeps_in("wait"), lambda: dict(scenario=sys.argv[1]))
    with cond:
        cond.wait()
    _common.sleep_forever()


def stale_build_lock() -> None:
    """torch.utils.cpp_extension.load of an extension whose build folder holds the `lock` an earlier
    build, killed mid-way, left: the loader waits for it (FileBaton.wait) and would never build."""
    from torch.utils.cpp_extension import load

    build = _common.workdir() / "ext" / "fused_ops"
    build.mkdir(parents=True)
    source = build.parent / "fused_ops.cpp"
    source.write_text("int fused_ops_version() { return 1; }\n")
    (build / "lock").write_text("")  # what the killed build left behind
    ready_in("sleep", path=str(build / "lock"))
    load(name="fused_ops", sources=[str(source)], build_directory=str(build))
    _common.sleep_forever()


def slot_backoff() -> None:
    """Waits for a scheduler's "slot free" flag with a growing sleep (0.5 s, then 1.5 times longer each
    look, up to 20 s), as a job queued for an accelerator does; the flag has not come yet."""
    flag = str(_common.workdir() / "slot_free")
    print("waiting for a free slot...", flush=True)
    ready_in("sleep", path=flag)
    delay = 0.5
    while not os.path.exists(flag):
        time.sleep(delay)
        delay = min(delay * 1.5, 20.0)
    _common.sleep_forever()


SCENARIOS = {
    "child_prompt_pipe": child_prompt_pipe,
    "prompt_piped": prompt_piped,
    "notify_missed": notify_missed,
    "stale_build_lock": stale_build_lock,
    "slot_backoff": slot_backoff,
}

if __name__ == "__main__":
    _common.run_scenario(SCENARIOS)
