"""Hang: the trainer logs through logging.handlers.SysLogHandler to a local log agent's unix datagram
socket, and the agent (a process outside the job: started in the background and re-parented, as a
node's syslog daemon is) has stopped reading. Its receive queue fills and the trainer blocks in
sendto() inside the handler's emit (the sixteenth hunt's j12: output-blocked, "Drain the pipe to a
file", the agent unnamed)::

    handler = logging.handlers.SysLogHandler(address="devlog.sock")
    log.info("step %d ...", step)      # blocks once the agent's queue is full

READY (``{"pid", "agent_pid"}``) once the trainer sleeps in its send.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import socket
import time

import _common


def start_agent() -> int:
    """A log agent that binds devlog.sock and never reads, outside the job's process tree: forked twice
    (its parent exits), in the job's process group so that stopping the job stops it too."""
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            agent = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            agent.bind("devlog.sock")
            os.write(ready_w, str(os.getpid()).encode())
            while True:  # wedged: never reads
                time.sleep(3600)
        os._exit(0)
    os.waitpid(child, 0)
    return int(os.read(ready_r, 32))


if __name__ == "__main__":
    os.chdir(_common.workdir())  # a unix socket's path: the short name, from here
    agent = start_agent()
    log = logging.getLogger("train")
    log.addHandler(logging.handlers.SysLogHandler(address="devlog.sock"))
    log.setLevel(logging.INFO)
    me = os.getpid()
    _common.ready_when(lambda: _common.sleeping_steadily(me), lambda: {"pid": me, "agent_pid": agent})
    for step in range(100_000):
        log.info("step %d loss %.4f %s", step, 1.0 / (step + 1), "x" * 2000)
