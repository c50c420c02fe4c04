"""Collect snapshots over ssh: `ssh -o BatchMode=yes host ...` per host, in parallel, one deadline."""

from __future__ import annotations

import math
import re
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from debug_stuck.errors import BadInput
from debug_stuck.live.nodes import (
    DEFAULT_NODE_TIMEOUT,
    MergedSnapshot,
    NodeSnapshot,
    Progressor,
    last_line,
    read_wire,
    remote_argv,
    snapshot_arguments,
)

SSH_CONNECT_TIMEOUT = 5
# user@host, a DNS name, or an IPv4/IPv6 address; never anything ssh could take for an option
HOST_NAME = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9._-]*@)?(?:[A-Za-z0-9_][A-Za-z0-9._-]*|[0-9A-Fa-f:.]+)$")
MAX_SSH_SESSIONS = 128  # ssh clients at once; all share one deadline


def parse_host(spec: str) -> Tuple[str, Optional[int]]:
    """A --hosts entry (host, user@host, host:2222, [::1]:2222) as (host, port)."""
    spec = spec.strip()
    if not spec:
        raise BadInput("an empty host in --hosts", "give host names separated by commas, e.g. --hosts node1,node2")
    m = re.match(r"^\[([^\]]+)\](?::(\d+))?$", spec) or re.match(r"^([^:\s]+)(?::(\d+))?$", spec)
    if not m or (m.group(2) is not None and not 0 < int(m.group(2)) < 65536):
        raise BadInput(f"--hosts: {spec!r} is not a host", "give host, user@host or host:port")
    host = m.group(1)
    # ssh would read "-oProxyCommand=..." as an option and run it: a host never starts with "-"
    if not HOST_NAME.match(host):
        raise BadInput(
            f"--hosts: {spec!r} is not a host name",
            "give host, user@host or host:port (letters, digits, '.', '-', '_', '@'; not starting with '-')",
        )
    return host, int(m.group(2)) if m.group(2) else None


def parse_hosts(text: str) -> List[str]:
    hosts = [h.strip() for h in text.split(",")]
    for h in hosts:
        parse_host(h)
    return list(dict.fromkeys(hosts))


def ssh_argv(spec: str, remote: Sequence[str], timeout: float, ssh_options: Iterable[str] = ()) -> List[str]:
    host, port = parse_host(spec)
    connect = max(1, math.ceil(min(SSH_CONNECT_TIMEOUT, timeout)))
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect}"]
    for option in ssh_options:
        argv += ["-o", option]
    if port is not None:
        argv += ["-p", str(port)]
    # "--" ends ssh's options: whatever follows is the host, then the remote command. ssh hands
    # the remote shell one string: quote every word.
    return argv + ["--", host, " ".join(shlex.quote(a) for a in remote)]


def _collect_one_host(
    spec: str, remote: List[str], deadline: float, limit: float, ssh_options: Sequence[str]
) -> NodeSnapshot:
    from debug_stuck.bounded import run_command

    node = NodeSnapshot(spec)
    timeout = deadline - time.monotonic()
    if timeout < 1.0:
        # More hosts than ssh sessions at once, and the time ran out before this one's turn.
        node.timed_out = True
        node.error = "not reached before the node timeout (too many hosts for the time given)"
        return node
    try:
        result = run_command(ssh_argv(spec, remote, timeout, ssh_options), timeout)
    except FileNotFoundError:
        node.error = "ssh not found on this machine"
        return node
    if result.timed_out:
        node.timed_out = True
        node.error = f"did not answer within {limit:g} s (a dead, wedged or overloaded node)"
        return node
    if read_wire(node, result.stdout):
        return node
    why = last_line(result.stderr) or f"exit status {result.returncode}"
    if result.returncode == 255 and "timed out" in why:
        # TCP accepted, then silence: as wedged as a node that never answers at all
        node.timed_out = True
        node.error = f"did not answer (a dead, wedged or overloaded node): ssh: {why}"
    elif result.returncode == 255:
        node.error = f"ssh failed: {why}"
    else:
        node.error = f"snapshot failed: {why}"
    return node


def collect_hosts(
    hosts: Sequence[str],
    pids_or_auto: Union[Sequence[int], str, bool, None] = "auto",
    timeout: float = DEFAULT_NODE_TIMEOUT,
    window: float = 1.0,
    native: bool = True,
    ssh_options: Sequence[str] = (),
    slurm_job: Optional[str] = None,
    progress: Progressor = None,
) -> MergedSnapshot:
    """A snapshot from every host over ssh, in parallel, each bounded by `timeout`."""
    hosts = [h.strip() for h in hosts if h.strip()]
    if not hosts:
        raise BadInput("no hosts given", "give --hosts node1,node2 (host or host:port)")
    for spec in hosts:
        parse_host(spec)
    say = progress or (lambda msg: None)
    started = time.monotonic()
    remote = remote_argv(snapshot_arguments(pids_or_auto, slurm_job, window, native))
    say(f"collecting from {len(hosts)} host(s) over ssh (at most {timeout:g} s)")
    deadline = started + timeout
    with ThreadPoolExecutor(max_workers=min(MAX_SSH_SESSIONS, len(hosts)), thread_name_prefix="ssh") as pool:
        nodes = list(pool.map(lambda h: _collect_one_host(h, remote, deadline, timeout, ssh_options), hosts))
    seen: Dict[str, int] = {}
    for node in nodes:  # two aliases of one machine must not merge into one node
        seen[node.node] = seen.get(node.node, 0) + 1
    for node, spec in zip(nodes, hosts):
        if seen[node.node] > 1 and node.node != spec:
            node.node = f"{node.node} ({spec})"
    merged = MergedSnapshot("ssh", "hosts " + ",".join(hosts), nodes, timeout)
    merged.seconds = time.monotonic() - started
    return merged
