"""Hang: a thread blocks in native code without giving up the GIL, and every other thread stops behind it.

``python gil_held.py native_lock|socket``. Native code must release the GIL around a call that may
block; ``ctypes.PyDLL`` (like a C extension that forgets ``Py_BEGIN_ALLOW_THREADS``) keeps it.

- ``native_lock``: a writer thread takes a C mutex (through ``ctypes.CDLL``, the GIL released),
  then wants to run Python again; the main thread asks for the same mutex through ``ctypes.PyDLL``,
  holding the GIL. Each waits for what the other holds: a GIL / native-lock deadlock::

      libc_nogil.pthread_mutex_lock(mutex)      # writer: holds the mutex, then needs the GIL
      libc_gil.pthread_mutex_lock(mutex)        # main: holds the GIL, waits for the mutex

- ``socket``: a metrics thread reads its server's reply through ``ctypes.PyDLL``'s ``recv``, on a
  connection the server never accepted; the training loop in the main thread (pure Python) waits
  for the GIL from then on.

READY (``{"pid", "holder_tid", "waiter_tid"}``) is written just before the blocking call: once the
holder keeps the GIL no thread of the process can run Python, the watcher thread included.
"""

from __future__ import annotations

import ctypes
import socket
import sys
import threading
import time

import _common

LIBC = "libc.so.6"


def native_lock() -> None:
    libc_nogil = ctypes.CDLL(LIBC)  # releases the GIL around each call
    libc_gil = ctypes.PyDLL(LIBC)  # keeps holding it
    mutex = ctypes.create_string_buffer(64)  # a pthread_mutex_t; all zero is PTHREAD_MUTEX_INITIALIZER
    locked = threading.Event()
    writer_tid: list = []

    def writer() -> None:
        writer_tid.append(threading.get_native_id())
        libc_nogil.pthread_mutex_lock(mutex)
        locked.set()
        time.sleep(0.5)  # the main thread blocks meanwhile; waking up, this thread needs the GIL
        total = sum(range(10))
        libc_nogil.pthread_mutex_unlock(mutex)
        print(f"writer done {total}", flush=True)

    thread = threading.Thread(target=writer, name="writer")
    thread.start()
    locked.wait()
    _common.mark_ready(holder_tid=threading.get_native_id(), waiter_tid=writer_tid[0])
    libc_gil.pthread_mutex_lock(mutex)
    print("never reached", flush=True)


def socket_reply() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # never accepts: the kernel completes the handshake, no reply ever comes
    client = socket.create_connection(server.getsockname())
    libc_gil = ctypes.PyDLL(LIBC)
    buffer = ctypes.create_string_buffer(4096)
    uploader_tid: list = []

    def uploader() -> None:
        uploader_tid.append(threading.get_native_id())
        time.sleep(0.5)
        libc_gil.recv(client.fileno(), buffer, len(buffer), 0)  # blocks, the GIL held
        print("never reached", flush=True)

    thread = threading.Thread(target=uploader, name="metrics-uploader", daemon=True)
    thread.start()
    while not uploader_tid:
        time.sleep(0.01)
    _common.mark_ready(holder_tid=uploader_tid[0], waiter_tid=threading.get_native_id())
    step = 0
    while True:  # the training loop: pure Python, so it needs the GIL at every bytecode
        loss = sum(i * i for i in range(20_000)) / 1e9
        step += 1
        if step % 50 == 0:
            print(f"step {step} loss {loss:.3f}", flush=True)


if __name__ == "__main__":
    {"native_lock": native_lock, "socket": socket_reply}[sys.argv[1] if len(sys.argv) > 1 else "native_lock"]()
