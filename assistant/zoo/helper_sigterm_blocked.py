"""Hang: the trainer blocks SIGINT and SIGTERM around its setup and starts its feature-server helper
inside that window; the helper inherits the mask (signal(7): kept across fork and exec). At the end
the trainer calls ``server.terminate(); server.wait()``: the SIGTERM stays pending in the helper,
which serves on, and the wait never returns (the fifteenth hunt's j19, "Blocked on an external
service" at 90%)::

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    server = subprocess.Popen([sys.executable, "-I", "-c", SERVER])
    ...
    server.terminate()
    server.wait()

READY (``{"pid", "server_pid"}``) once SIGTERM is pending in the helper and the trainer waits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import _common

# the helper: accepts on a unix socket with a timeout, for ever (its own code, not socketserver's)
SERVER = """
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8); s.settimeout(1.0)
while True:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    c.sendall(os.urandom(4096)); c.close()
"""


def sigterm_pending(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as fh:
        fields = dict(line.split(":", 1) for line in fh if ":" in line)
    pending = int(fields["ShdPnd"], 16) | int(fields["SigPnd"], 16)
    return bool(pending >> (signal.SIGTERM - 1) & 1)


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # no stop in mid-setup
    here = _common.workdir()  # bound by its short name: a unix socket's path has 107 bytes at most
    server = subprocess.Popen([sys.executable, "-I", "-c", SERVER, "features.sock"], cwd=here)
    if not _common.wait_until(lambda: (here / "features.sock").exists() or server.poll() is not None, timeout=30):
        raise SystemExit("the feature server did not start")
    _common.log("training done; stopping the feature server")
    server.terminate()
    _common.ready_when(
        lambda: sigterm_pending(server.pid) and _common.sleeping_steadily(os.getpid()),
        lambda: {"pid": os.getpid(), "server_pid": server.pid},
    )
    server.wait()
    _common.log("feature server stopped")
