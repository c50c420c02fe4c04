"""Whether process families started side by side talk to each other: a launch script that starts a
trainer and its sidecar (a metrics server, an uploader, a data feeder) starts one job, while a sweep
script that starts four trainings starts four. What ties them is a channel only they hold: a pipe
(`a | b`) or a TCP connection from one to a port of the other. A pipe the wrapper holds too is its
own stdout, inherited by every child, and ties nothing."""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, Set, Tuple

from debug_stuck.probes.collectors.procfs import bounded_read as _bounded
from debug_stuck.probes.collectors.sockets import socket_tables

MAX_FDS = 4096  # per process: more than any trainer holds, and a bound on a runaway one


def _fd_targets(pid: int) -> List[str]:
    def read() -> List[str]:
        out = []
        for name in os.listdir(f"/proc/{pid}/fd")[:MAX_FDS]:
            try:
                out.append(os.readlink(f"/proc/{pid}/fd/{name}"))
            except OSError:
                continue
        return out

    return _bounded(read, f"the open files of {pid}", []) or []


def _host(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[0]


def _port(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[1]


class _Ends:
    """The channels one family holds: pipe inodes and TCP endpoints. (A FIFO is a path: telling one
    from a file takes a stat of every open file, which a dead mount can hang.)"""

    def __init__(self) -> None:
        self.channels: Set[str] = set()
        self.tcp: Set[Tuple[str, str]] = set()  # (local, remote)
        self.listening: Set[str] = set()  # ports
        self.hosts: Set[str] = {"127.0.0.1", "0000:0000:0000:0000:0000:0000:0000:0001"}  # this machine's

    def add(self, pid: int, table: Dict[int, dict]) -> None:
        for target in _fd_targets(pid):
            if target.startswith("pipe:["):
                self.channels.add(target)
            elif target.startswith("socket:["):
                entry = table.get(int(target[8:-1]))
                if not entry or entry.get("proto") != "tcp":
                    continue
                self.hosts.add(_host(entry["local"]))
                if entry["state"] == "LISTEN":
                    self.listening.add(_port(entry["local"]))
                else:
                    self.tcp.add((entry["local"], entry["remote"]))

    def talks_to(self, other: _Ends) -> bool:
        if self.channels & other.channels:
            return True
        mirrored = {(remote, local) for local, remote in other.tcp}
        if self.tcp & mirrored:
            return True
        return any(_port(remote) in other.listening for _, remote in self.tcp if _host(remote) in self.hosts)


def families_linked(wrapper: int, families: Iterable[Iterable[int]]) -> bool:
    """Whether the families (each a list of PIDs) form one connected whole through channels that the
    wrapper itself does not hold."""
    table = socket_tables(wrapper)
    inherited = _Ends()
    inherited.add(wrapper, table)
    ends: List[_Ends] = []
    for family in families:
        one = _Ends()
        for pid in family:
            one.add(pid, table)
        one.channels -= inherited.channels
        ends.append(one)
    if len(ends) < 2:
        return True
    reached, frontier = {0}, [0]
    while frontier:
        here = frontier.pop()
        for i, other in enumerate(ends):
            if i not in reached and (ends[here].talks_to(other) or other.talks_to(ends[here])):
                reached.add(i)
                frontier.append(i)
    return len(reached) == len(ends)
