"""Hang: the trainer waits with no timeout for a learning-rate update from its controller over UDP,
and nothing sends to its port (cause ``external-service``).

``python udp_controller.py``. The socket is bound to 127.0.0.1 on a free port; every few steps the loop
calls ``sock.recvfrom(64)`` for the next update (the eleventh hunt's j18: "a receive on a socket", the
socket unnamed, a ``requests`` timeout as the fix).

READY (``{"pid", "port"}``): once the main thread has sat in its receive for 5 consecutive samples.
"""

from __future__ import annotations

import os
import socket
import struct
import time

import _common


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    _common.ready_when(
        lambda: (
            _common.blocked_in(os.getpid(), None, ("__skb_wait_for_more_packets",), ("recvfrom",))
            and _common.sleeping_steadily(os.getpid())
        ),
        lambda: {"port": port},
    )
    lr = 0.1
    for step in range(1, 100000):
        if step % 20 == 0:
            print(f"step {step} lr {lr}: waiting for the controller's update", flush=True)
            data, _ = sock.recvfrom(64)  # no timeout: nothing sends to this port
            lr = struct.unpack("d", data)[0]
        time.sleep(0.01)


if __name__ == "__main__":
    main()
