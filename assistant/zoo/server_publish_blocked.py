"""Hang: the trainer asks its reward server child for each step's reward; the server, one thread,
publishes every scored batch to its dashboard subscriber with ``sendall`` before it replies, and the
dashboard reads its subscription only between long sleeps (the seventeenth hunt's j06)::

    for sub in subscribers:
        sub.sendall(event)                # the dashboard's buffers are full: blocks
    client.sendall(reply)                 # the trainer waits for this

It was "the peer never answers (pid N, sleeping)", external-service, no culprit: the server was
taken for a silent service, not followed to the subscriber its send waits for.

READY (``{"pid", "server_pid", "dashboard_pid"}``) once the server is blocked sending and the trainer
sleeps in its read.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import _common

SERVER = """
import socket
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
subscriber, _ = listener.accept()
subscriber.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # small buffers: the first event fills them
subscriber.recv(3)
print("subscribed", flush=True)
client, _ = listener.accept()
stream = client.makefile("rwb")
while stream.readline():
    subscriber.sendall(b"histogram " + b"x" * 200000 + b"\\n")  # publish, then answer
    stream.write(b"0.5\\n")
    stream.flush()
"""
DASHBOARD = """
import socket, sys, time
feed = socket.socket()
feed.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
feed.connect(("127.0.0.1", int(sys.argv[1])))
feed.sendall(b"SUB")
while True:
    time.sleep(3600)  # refreshes its view once an hour
"""

if __name__ == "__main__":
    server = subprocess.Popen([sys.executable, "-I", "-c", SERVER], stdout=subprocess.PIPE)
    port = int(server.stdout.readline())
    dashboard = subprocess.Popen([sys.executable, "-I", "-c", DASHBOARD, str(port)])
    server.stdout.readline()  # "subscribed": the dashboard is the subscriber, the trainer the client
    connection = socket.create_connection(("127.0.0.1", port))
    replies = connection.makefile("rwb")
    _common.ready_when(
        lambda: (
            _common.blocked_in(server.pid, None, ("sk_stream_wait_memory", "wait_woken"), ("sendto",))
            and _common.sleeping_steadily(os.getpid())
        ),
        lambda: {"server_pid": server.pid, "dashboard_pid": dashboard.pid},
    )
    for step in range(100000):
        replies.write(f"step {step}\n".encode())
        replies.flush()
        reward = float(replies.readline())
        _common.log(f"step {step} reward {reward}")
