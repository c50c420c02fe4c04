"""Hangs the Python docs warn of, each a thread waiting on itself through a library
(``python library_self_waits.py {server_shutdown|import_join}``):

- ``server_shutdown``: a control server (``socketserver.TCPServer`` in a thread) whose ``stop``
  request handler calls ``self.server.shutdown()``: shutdown waits for serve_forever's loop, which
  runs that handler (the thirteenth hunt's j19: "an Event nobody sets ... find what should set it").
  The main thread joins the server thread.
- ``import_join``: a plugins module starts a warm-up thread at import and joins it; the thread
  imports the plugins module, whose import lock the importing main thread holds (the thirteenth
  hunt's j13: "a lock at acquire (<frozen importlib._bootstrap>)"). The module is written to the
  workdir and imported from there.

READY (``{"pid"}``): once the main thread has slept in ``join`` for 5 consecutive samples.
"""

from __future__ import annotations

import os
import socket
import socketserver
import sys
import threading

import _common

PLUGINS = """
import threading

REGISTRY = {}


def warm():
    import zoo_plugins  # the module being imported: its lock is held by the importing thread

    zoo_plugins.REGISTRY["ready"] = True


_t = threading.Thread(target=warm, name="plugin-warmup")
_t.start()
_t.join()
"""


class Control(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        if self.request.recv(16).strip() == b"stop":
            self.server.shutdown()  # the slip: from serve_forever's own thread


def server_shutdown() -> None:
    server = socketserver.TCPServer(("127.0.0.1", 0), Control)
    thread = threading.Thread(target=server.serve_forever, name="control-server")
    thread.start()
    with socket.create_connection(server.server_address) as conn:
        conn.sendall(b"stop")
    thread.join()


def import_join() -> None:
    (_common.workdir() / "zoo_plugins.py").write_text(PLUGINS)
    sys.path.insert(0, str(_common.workdir()))
    import zoo_plugins  # noqa: F401


if __name__ == "__main__":
    _common.ready_when(_common._main_sleeps_in("join"))
    print("starting", flush=True)
    {"server_shutdown": server_shutdown, "import_join": import_join}[sys.argv[1]]()
    print("done", os.getpid(), flush=True)
