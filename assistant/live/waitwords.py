"""How a wait's object and the process at its other end are said in words, for the chain's hops."""

from __future__ import annotations

from typing import List

KIND_WORDS = {
    "fifo": "the FIFO",
    "pipe": "a pipe",
    "file": "the file",
    "dir": "the folder",
    "device": "the device",
    "tty": "the terminal",
    "socket": "a socket",
}
OP_WORDS = {
    "open": "open()",
    "read": "a read",
    "write": "a write",
    "sync": "fsync()",
    "connect": "connect()",
    "accept": "accept()",
    "recv": "a receive",
    "send": "a send",
    "lock": "a file lock",
    "poll": "poll()",
    "select": "select()",
    "epoll": "epoll_wait()",
}


def object_text(obj: dict) -> str:
    """What a wait waits on, in words: "the FIFO /data/shard-4.fifo", "a TCP connection from A to B (ESTABLISHED)"."""
    kind = obj.get("kind", "other")
    if kind == "socket":
        if obj.get("proto") == "tcp" and obj.get("state") == "LISTEN":
            return f"a TCP socket listening at {obj.get('local')}"  # its remote is 0.0.0.0:0: no peer
        if obj.get("proto") == "tcp":
            return f"a TCP connection from {obj.get('local')} to {obj.get('remote')} ({obj.get('state')})"
        if obj.get("proto") == "udp" and obj.get("remote"):
            return f"a UDP socket from {obj.get('local')} to {obj.get('remote')}"
        if obj.get("proto") == "udp":
            return f"a UDP socket bound to {obj.get('local')} (it receives what any process sends to that port)"
        if obj.get("proto") == "unix":
            return f"a unix socket{' ' + obj['path'] if obj.get('path') else ''}"
        return "a socket"
    if kind == "pipe":
        return "a pipe"
    path = obj.get("path") or obj.get("what") or "?"
    text = f"{KIND_WORDS.get(kind, 'the file')} {path}"
    if kind in ("file", "dir") and obj.get("fs"):
        text += f" on {obj['fs']} ({'network' if obj.get('network') else 'local'}: {obj.get('mount')})"
    return text


def describe_peer(peers: List[dict]) -> str:
    """The process at the other end of a pipe or connection, and its state."""
    if not peers:
        return ""
    p = peers[0]
    state = {"T": "stopped (SIGSTOP)", "t": "stopped by a debugger", "D": "in uninterruptible sleep", "Z": "a zombie"}
    how = state.get(p.get("state"), "running" if p.get("state") == "R" else "sleeping")
    return f"pid {p['pid']} ({p.get('name') or '?'}), {how}"
