"""Hang: the trainer's parameter server is a child running http.server's HTTPServer, one request at a
time. A weight-sync thread long-polls ``/wait?v=1``, whose handler waits on a Condition until version
1 is published; the main thread's ``/publish?v=1`` then waits in the server's listen backlog, never
accepted (the sixteenth hunt's j13: external-service, "give urlopen() a timeout")::

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.startswith("/wait"):
                with cond:
                    cond.wait_for(lambda: version >= wanted)
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()     # not ThreadingHTTPServer

READY (``{"pid", "server_pid", "port"}``) once the main thread waits for /publish's answer.
"""

from __future__ import annotations

import os
import threading
import urllib.request

import _common

PARAM_SERVER = """
import sys, threading
from http.server import BaseHTTPRequestHandler, HTTPServer
cond = threading.Condition()
version = 0

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        global version
        wanted = int(self.path.split("v=")[1])
        if self.path.startswith("/wait"):
            with cond:
                cond.wait_for(lambda: version >= wanted)  # a long poll: until that version is published
        else:
            with cond:
                version = wanted
                cond.notify_all()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(str(version).encode())

server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as reply:  # no timeout
        return reply.read().decode()


if __name__ == "__main__":
    server, port = _common.start_server_child(PARAM_SERVER)
    syncer = threading.Thread(target=get, args=(port, "/wait?v=1"), name="weight-sync", daemon=True)
    syncer.start()
    _common.wait_until(lambda: _common.sleeping_steadily(os.getpid(), syncer.native_id), timeout=30)
    publishing = threading.Event()
    _common.ready_when(
        lambda: publishing.is_set() and _common.sleeping_steadily(os.getpid()),
        lambda: {"pid": os.getpid(), "server_pid": server.pid, "port": port},
    )
    publishing.set()
    _common.log(f"published: {get(port, '/publish?v=1')}")
