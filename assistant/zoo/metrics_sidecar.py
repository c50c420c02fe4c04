"""Hang: the trainer pushes each metric to a node-local aggregator it started (a
``socketserver.ThreadingTCPServer`` child) and reads its ACK with no timeout; at its 50th record
the aggregator's handler thread calls ``flush()`` while ``record()`` holds ``self.lock``, and
``flush()`` takes the same ``threading.Lock`` (``python metrics_sidecar.py``).

The aggregator's main thread idles in ``serve_forever``'s poll of its listening socket; its handler
thread waits for a lock it holds itself; the trainer waits for the ACK.

READY (``{"pid", "server_pid", "server_file"}``) once the trainer's main thread sleeps in its read.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import _common

AGGREGATOR = '''"""Node-local metrics aggregator: ranks push 'name value step' lines, it ACKs each one and
flushes the buffer to a CSV every FLUSH_EVERY records."""
import socketserver
import sys
import threading

FLUSH_EVERY = 50


class Aggregator(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, address):
        super().__init__(address, Handler)
        self.lock = threading.Lock()
        self.buffer = []

    def record(self, line):
        with self.lock:
            self.buffer.append(line)
            if len(self.buffer) >= FLUSH_EVERY:
                self.flush()

    def flush(self):
        with self.lock:  # also called by the periodic flusher
            with open("metrics.csv", "a") as out:
                out.writelines(line + "\\n" for line in self.buffer)
            self.buffer.clear()


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            self.server.record(raw.decode().strip())
            self.wfile.write(b"ok\\n")
            self.wfile.flush()


server = Aggregator(("127.0.0.1", int(sys.argv[1])))
print("listening", flush=True)
server.serve_forever()
'''


def main() -> None:
    workdir = _common.workdir()
    source = workdir / "metrics_agg.py"
    source.write_text(AGGREGATOR)
    port = _common.free_port()
    server = subprocess.Popen([sys.executable, "-u", str(source), str(port)], cwd=workdir, stdout=subprocess.PIPE)
    assert server.stdout.readline() == b"listening\n"
    link = socket.create_connection(("127.0.0.1", port))
    acks = link.makefile("rb")
    main_thread = threading.main_thread()
    _common.ready_when(
        lambda: (
            "readinto" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id, samples=10)
        ),
        lambda: {"server_pid": server.pid, "server_file": str(source)},
    )
    for step in range(1, 10**6):
        link.sendall(f"loss {1.0 / step:.5f} {step}\n".encode())
        acks.readline()  # the ACK, no timeout


if __name__ == "__main__":
    main()
