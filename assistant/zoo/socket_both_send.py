"""Hang: two processes joined by one socket each send a large message before reading the other's
(cause ``thread-deadlock``).

``python socket_both_send.py {tcp|socketpair}``. Two workers exchange their 16 MB of parameters after
each step: each calls ``sock.sendall(mine)`` and only then ``recv`` for the other's. The socket
buffers hold a few hundred kB, so both ``sendall`` calls fill them and wait for the other side to
read, which it never does while it sends (the tenth hunt's j16, no cause named). ``tcp`` (the
default): the parent listens on 127.0.0.1 and a ``multiprocessing`` child (fork) connects;
``socketpair``: the child gets one end of a ``socket.socketpair()``.

``python socket_both_send.py no_newline``: both read instead. A tokenizer child serves requests by
line (``for line in conn.makefile()``); the trainer sends its request without the newline and waits
in ``recv`` for the reply (the thirteenth hunt's j08: "the peer never answers", external-service).

READY (``{"pid", "child_pid", "send_line"}``): once both processes have slept in their sends for 5
consecutive samples (the parent checks the child's kernel state).
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import socket
import sys
import threading

import _common

MESSAGE = 16 * 1024 * 1024


def exchange(sock: socket.socket, rank: int) -> bytes:
    mine = bytes([rank]) * MESSAGE
    sock.sendall(mine)  # the bug: both sides send all before either reads
    theirs = bytearray()
    while len(theirs) < MESSAGE:
        theirs += sock.recv(1 << 20)
    return bytes(theirs)


def worker(address, pair_end) -> None:
    if pair_end is None:
        sock = socket.create_connection(address)
    else:
        sock = pair_end
    for _step in range(1000):
        exchange(sock, 1)


def send_line() -> int:
    lines, first = inspect.getsourcelines(exchange)
    return first + next(i for i, line in enumerate(lines) if "sock.sendall(" in line)


def main(variant: str) -> None:
    context = multiprocessing.get_context("fork")
    if variant == "socketpair":
        mine, theirs = socket.socketpair()
        child = context.Process(target=worker, args=(None, theirs), name="param-peer")
        child.start()
        theirs.close()
        sock = mine
    else:
        server = socket.create_server(("127.0.0.1", 0))
        child = context.Process(target=worker, args=(server.getsockname(), None), name="param-peer")
        child.start()
        sock, _ = server.accept()
    main_thread = threading.main_thread()

    def both_send() -> bool:
        return (
            "exchange" in _common.stack_functions(main_thread.ident)
            and _common.sleeping_steadily(os.getpid(), main_thread.native_id)
            and _common.sleeping_steadily(child.pid)
        )

    _common.ready_when(both_send, lambda: {"child_pid": child.pid, "send_line": send_line()})
    for step in range(1000):
        exchange(sock, 0)
        print(f"step {step} exchanged", flush=True)


def tokenizer_server(address) -> None:
    conn = socket.create_connection(address)
    for line in conn.makefile():  # a request is a line: it waits for the newline
        conn.sendall(f"{len(line.split())}\n".encode())


def ask_without_newline() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    child = multiprocessing.get_context("fork").Process(
        target=tokenizer_server, args=(server.getsockname(),), name="tokenizer"
    )
    child.start()
    sock, _ = server.accept()
    main_thread = threading.main_thread()

    def both_read() -> bool:
        return _common.sleeping_steadily(os.getpid(), main_thread.native_id) and _common.sleeping_steadily(child.pid)

    _common.ready_when(both_read, lambda: {"child_pid": child.pid, "send_line": 0})
    sock.sendall(b"the quick brown fox")  # the bug: no newline, the server's readline waits for it
    print("tokens:", sock.recv(64), flush=True)


if __name__ == "__main__":
    variant = sys.argv[1] if len(sys.argv) > 1 else "tcp"
    ask_without_newline() if variant == "no_newline" else main(variant)
