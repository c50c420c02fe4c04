"""The sockets of a network namespace: /proc/net's tables (addresses, TCP state, unix paths) and
the kernel's tcp_info as `ss -ti` prints it (how long since a connection last received data, and
whether data still arrives), each read bounded."""

from __future__ import annotations

import os
import re
import time
from typing import Dict, List, Optional, Tuple

from debug_stuck.probes.collectors.procfs import bounded_read as _bounded
from debug_stuck.probes.collectors.procfs import fd_target
from debug_stuck.probes.collectors.procfs import read_text as _read_text

TCP_STATES = {
    "01": "ESTABLISHED",
    "02": "SYN_SENT",
    "03": "SYN_RECV",
    "04": "FIN_WAIT1",
    "05": "FIN_WAIT2",
    "06": "TIME_WAIT",
    "07": "CLOSE",
    "08": "CLOSE_WAIT",
    "09": "LAST_ACK",
    "0A": "LISTEN",
    "0B": "CLOSING",
}


def _addr(hexaddr: str) -> str:
    host, port = hexaddr.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = ".".join(str(b) for b in raw[::-1])
    else:
        words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
        joined = b"".join(words)
        ip = ":".join(joined[i : i + 2].hex() for i in range(0, 16, 2))
        if ip.startswith("0000:0000:0000:0000:0000:ffff:"):
            v4 = joined[12:]
            ip = ".".join(str(b) for b in v4)
    return f"{ip}:{int(port, 16)}"


def socket_tables(pid: int) -> Dict[int, dict]:
    """inode -> socket entry ({"proto", "local", "remote", "state"} or {"proto": "unix", "path"}),
    from pid's network namespace; an entry's inode 0 means no process holds it (not accepted yet)."""
    out: Dict[int, dict] = {}
    listening: Dict[str, int] = {}
    unowned: List[dict] = []
    for proto in ("tcp", "tcp6"):
        text = _bounded(lambda p=proto: _read_text(f"/proc/{pid}/net/{p}", 4 << 20), f"/proc/net/{proto}") or ""
        for line in text.splitlines()[1:]:
            f = line.split()
            if len(f) < 10:
                continue
            entry = {"proto": "tcp", "local": _addr(f[1]), "remote": _addr(f[2]), "state": TCP_STATES.get(f[3], f[3])}
            inode = int(f[9])
            if inode:
                out[inode] = entry
            else:
                unowned.append(entry)
            if entry["state"] == "LISTEN":
                listening[entry["local"].rsplit(":", 1)[1]] = inode
    for proto in ("udp", "udp6"):  # a datagram socket: bound to a local port, connected or not (state 07)
        text = _bounded(lambda p=proto: _read_text(f"/proc/{pid}/net/{p}", 4 << 20), f"/proc/net/{proto}") or ""
        for line in text.splitlines()[1:]:
            f = line.split()
            if len(f) >= 10 and int(f[9] or 0):
                remote = _addr(f[2])
                connected = f[3] == "01" and not remote.endswith(":0")
                out[int(f[9])] = {
                    "proto": "udp",
                    "local": _addr(f[1]),
                    "remote": remote if connected else None,
                    "state": "ESTABLISHED" if connected else "UNCONN",
                }
    text = _bounded(lambda: _read_text(f"/proc/{pid}/net/unix", 4 << 20), "/proc/net/unix") or ""
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) >= 7 and f[6].isdigit():
            out[int(f[6])] = {"proto": "unix", "path": f[7] if len(f) > 7 else None}
    out[-1] = {"unowned": unowned, "listening": listening}  # connections nobody accepted yet
    return out


SS_SECONDS = 3.0
_SS_LASTRCV = re.compile(r"\blastrcv:(\d+)")
_SS_RECEIVED = re.compile(r"\bbytes_received:(\d+)")
_SS_SENT = re.compile(r"\bbytes_sent:(\d+)")
_SS_LASTSND = re.compile(r"\blastsnd:(\d+)")
RECEIVE_GAP = 0.5  # seconds between the two readings that tell data still arriving
RECEIVING_MS = 1000  # a connection that received data this recently may be receiving still


def _endpoint(text: str) -> Optional[Tuple[str, int]]:
    """("127.0.0.1", 80) from "127.0.0.1:80", "[::1]:80", "[::ffff:10.0.0.2]:80" or the full-width IPv6
    form of /proc/net/tcp6 (this module's _addr), so that both name one endpoint alike."""
    import ipaddress

    host, _, port = text.rpartition(":")
    host = host.strip("[]").split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(host)
        mapped = getattr(ip, "ipv4_mapped", None)
        return str(mapped or ip), int(port)
    except ValueError:
        return None


def tcp_last_receive() -> Dict[Tuple[Tuple[str, int], Tuple[str, int]], int]:
    """(local, remote) -> milliseconds since the connection last received data (the kernel's
    tcp_info tcpi_last_data_recv, as `ss -ti` prints it: lastrcv), for this network namespace's TCP
    connections. Empty when ss is missing or does not answer within SS_SECONDS."""
    return {pair: info[0] for pair, info in _tcp_info().items()}


def tcp_receiving(
    pairs, gap: float = RECEIVE_GAP, recent_ms: int = RECEIVING_MS
) -> Dict[Tuple[Tuple[str, int], Tuple[str, int]], Tuple[int, int, int]]:
    """(local, remote) -> (ms since it last received data, bytes it received and bytes it sent in
    `gap` seconds) for these connections, from two readings of tcp_info `gap` apart (lastrcv,
    bytes_received, bytes_sent): data that keeps coming, not one keep-alive packet, and whether the
    process asks for each piece (a polling client sends as it receives), or data that keeps leaving
    (an upload to a slow reader). The second reading is taken only when a connection received or
    sent something in the last `recent_ms` (ranks waiting on a silent peer cost no gap); the others
    get 0 bytes. Empty without ss."""
    first = _tcp_info()
    if not any(pair in first and min(first[pair][0], first[pair][3]) < recent_ms for pair in pairs):
        return {pair: (first[pair][0], 0, 0) for pair in pairs if pair in first}
    time.sleep(gap)
    second = _tcp_info()
    out = {}
    for pair in pairs:
        a, b = first.get(pair), second.get(pair)
        if a is not None and b is not None:
            # no count printed (ss leaves bytes_received out until something arrives): none moved that way,
            # yet how long since it last received still tells a silent connection from the others
            received = b[1] - a[1] if None not in (a[1], b[1]) else 0
            sent = b[2] - a[2] if None not in (a[2], b[2]) else 0
            out[pair] = (b[0], received, sent)
    return out


def _tcp_info() -> Dict[Tuple[Tuple[str, int], Tuple[str, int]], Tuple[int, Optional[int], Optional[int], int]]:
    """(local, remote) -> (lastrcv ms, bytes_received, bytes_sent: None when not printed, lastsnd ms), one
    bounded `ss -tinH` call."""
    from debug_stuck.bounded import run_command

    try:
        result = run_command(["ss", "-tinH", "state", "established"], SS_SECONDS)
    except OSError:
        return {}
    if result.timed_out or result.returncode != 0:
        return {}
    out: Dict[Tuple[Tuple[str, int], Tuple[str, int]], Tuple[int, Optional[int], Optional[int], int]] = {}
    pair = None
    for line in result.stdout.splitlines():
        if line[:1] and not line[:1].isspace():
            # [State] Recv-Q Send-Q Local Peer: the first two fields that are addresses
            ends = [e for e in (_endpoint(f) for f in line.split() if ":" in f) if e is not None]
            pair = (ends[0], ends[1]) if len(ends) >= 2 else None
            continue
        last = _SS_LASTRCV.search(line)
        if pair:
            # ss prints lastrcv (and bytes_sent) only when not 0 (iproute2 misc/ss.c tcp_stats_print):
            # a connection that received data this very millisecond shows none
            received, sent, last_sent = _SS_RECEIVED.search(line), _SS_SENT.search(line), _SS_LASTSND.search(line)
            out[pair] = (
                int(last.group(1)) if last else 0,
                int(received.group(1)) if received else None,
                int(sent.group(1)) if sent else 0,  # ss leaves bytes_sent out for a connection that sent none
                int(last_sent.group(1)) if last_sent else 0,
            )
        pair = None
    return out


MAX_PROCESS_FDS = 256  # descriptors looked at for a process's connections


def process_connections(pid: int) -> List[dict]:
    """The established TCP connections pid holds (bounded: its first MAX_PROCESS_FDS descriptors),
    each with how long since it last received and last sent data (`last_received_ms`,
    `last_sent_ms`, the kernel's tcp_info as `ss -ti` prints it) and its `received_total` bytes."""
    names = _bounded(lambda: os.listdir(f"/proc/{pid}/fd"), f"descriptors of {pid}", []) or []
    inodes: Dict[int, int] = {}
    for name in names[:MAX_PROCESS_FDS]:
        target = fd_target(pid, int(name)) if name.isdigit() else None
        if target and target.startswith("socket:[") and target.endswith("]"):
            inodes[int(target[8:-1])] = int(name)
    if not inodes:
        return []
    table = socket_tables(pid)
    conns = [
        dict(table[inode], fd=fd)
        for inode, fd in inodes.items()
        if table.get(inode, {}).get("proto") == "tcp" and table[inode].get("state") == "ESTABLISHED"
    ]
    info = _tcp_info() if conns else {}
    for conn in conns:
        found = info.get((_endpoint(str(conn.get("local"))), _endpoint(str(conn.get("remote")))))
        if found is not None:
            conn["last_received_ms"], conn["received_total"], _, conn["last_sent_ms"] = found
    return [c for c in conns if "last_received_ms" in c]


UNIX_PEERS = -2  # a socket table's key for its unix sockets' peers (-1 holds the unaccepted connections)
_SS_UNIX = re.compile(r"^u_\w+\s+\S+\s+\d+\s+\d+\s+.*?\s(?P<inode>\d+)\s+.*?\s(?P<peer>\d+)\s*$")


def unix_peers() -> Dict[int, int]:
    """inode -> the inode at the other end, for the connected unix sockets of this network namespace
    (/proc/net/unix does not say), from one bounded `ss -xnH` call; {} without ss."""
    from debug_stuck.bounded import run_command

    try:
        result = run_command(["ss", "-xnH"], SS_SECONDS)
    except OSError:
        return {}
    if result.timed_out or result.returncode != 0:
        return {}
    peers: Dict[int, int] = {}
    for line in result.stdout.splitlines():
        found = _SS_UNIX.match(line.strip())
        if found and found["peer"] != "0":
            peers[int(found["inode"])] = int(found["peer"])
    return peers
