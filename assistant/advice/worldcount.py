"""Who a rendezvous waits for, counted. Process-group setup completes only when every member has
arrived: torchrun's agents when --nnodes of them joined the elastic rendezvous (torch 2.13.0
torch/distributed/run.py: "--nnodes: Number of nodes, or the range of nodes in form
<minimum_nodes>:<maximum_nodes>"), the ranks when world_size of them reached the store
(torch/distributed/distributed_c10d.py init_process_group: "world_size (int, optional): Number of
processes participating in the job"). Counting what this machine runs against that number says
who is missing, which the stacks alone cannot."""

from __future__ import annotations

import os
import shlex
from typing import Dict, List, Optional

from debug_stuck.advice.facts import command_argv

# torch 2.13.0 torch/distributed/run.py: each option is accepted with '-' or '_' between its words
_NNODES = ("--nnodes",)
_ENDPOINT = ("--rdzv_endpoint", "--rdzv-endpoint")
_RDZV_ID = ("--rdzv_id", "--rdzv-id")
_MASTER = ("--master_addr", "--master-addr")
_MASTER_PORT = ("--master_port", "--master-port")
_SCRIPT_NAMES = ("torchrun", "torch.distributed.run", "torch.distributed.launch")


def missing_members(values: Dict[str, str], report, reader, end: dict) -> None:
    """Set `agent_nodes` (and its endpoint and a one-node command) for torchrun's agent waiting in
    its rendezvous, or `world_size` and `ranks_here` for ranks short of their world, when the chain
    ends in a rendezvous wait."""
    entry = reader.library_wait(end)
    if not entry or entry.get("wait") != "rendezvous":
        return
    proc = reader.processes.get(end.get("pid")) or {}
    if proc.get("role") == "launcher":
        _agent(values, command_argv(proc.get("cmdline")))
        return
    ranks = [p for p in report.processes or [] if p.get("role") == "rank" and p.get("state") != "Z"]
    addresses = {_address(p) for p in ranks}
    if len(addresses) > 1 and None not in addresses:
        # each rank waits at its own address: a port (or host) given to one rank only
        values["rdzv_split"] = "; ".join(
            f"rank {p.get('rank')} (pid {p.get('pid')}) {_address(p)}" for p in sorted(ranks, key=_rank_order)
        )
        return
    sizes = {p.get("world_size") for p in ranks}
    if len(sizes) != 1 or not isinstance(next(iter(sizes)), int):
        return
    world = next(iter(sizes))
    if world <= len(ranks):
        return
    here = sorted(p.get("rank") for p in ranks if p.get("rank") is not None)
    values["world_size"] = str(world)
    values["ranks_here"] = str(len(ranks))
    values["ranks_here_list"] = f" (rank {', '.join(map(str, here))})" if len(here) == len(ranks) else ""
    values["ranks_short"] = str(world - len(ranks))
    _in_turn(values, ranks, reader)


# CPython 3.11.7 Lib/subprocess.py: run, call, check_call and check_output start a child and return
# only when it has exited; Popen returns at once (its wait in a loop is how ranks started together end)
_WAITS_FOR_CHILD = ("run", "call", "check_call", "check_output")


def _in_turn(values: Dict[str, str], ranks: List[dict], reader) -> None:
    """`launched_in_turn` (where) when the ranks' one parent waits for its running child in a
    subprocess call that returns only at the child's exit, made inside a `for` or `while` loop of its
    own code: it starts the next rank only after this one ends, and this one waits for the next."""
    parents = {p.get("ppid") for p in ranks}
    parent = reader.processes.get(next(iter(parents))) if len(parents) == 1 else None
    if parent is None:
        return
    hop = {"pid": parent["pid"]}
    frames = reader.python_frames(hop)
    own = reader.own_frame(hop)
    if own is None or not any(
        f.get("function", "").split(".")[-1] in _WAITS_FOR_CHILD and (f.get("file") or "").endswith("subprocess.py")
        for f in frames
    ):
        return
    from debug_stuck.live.loops import innermost_loop
    from debug_stuck.live.selflock import source_of

    line = own.get("line")
    if innermost_loop(source_of(own.get("path") or own.get("file"), parent["pid"]) or "", line or 0) is not None:
        values["launched_in_turn"] = f"{own.get('file')}:{line}"
        values["launcher_pid"] = str(parent["pid"])


def _address(proc: dict) -> Optional[str]:
    """MASTER_ADDR:MASTER_PORT as the rank's environment gives them (the env:// rendezvous)."""
    env = proc.get("env") or {}
    return f"MASTER_ADDR={env.get('MASTER_ADDR')} MASTER_PORT={env['MASTER_PORT']}" if env.get("MASTER_PORT") else None


def _rank_order(proc: dict) -> tuple:
    return (proc.get("rank") is None, proc.get("rank") or 0, proc.get("pid") or 0)


def _agent(values: Dict[str, str], argv: List[str]) -> None:
    start = _launcher_start(argv)
    if start is None:
        return
    args = argv[start:]
    nnodes = _option(args, _NNODES)
    least = (nnodes or "").split(":", 1)[0]
    if not least.isdigit() or int(least) < 2:
        return
    values["agent_nodes"] = least
    values["agent_nnodes"] = nnodes or least
    endpoint = _option(args, _ENDPOINT)
    if endpoint is None and _option(args, _MASTER):
        endpoint = f"{_option(args, _MASTER)}:{_option(args, _MASTER_PORT) or '29500'}"
    rdzv_id = _option(args, _RDZV_ID)
    where = f" at {endpoint}" if endpoint else ""
    values["agent_rdzv"] = (f" {rdzv_id}" if rdzv_id else "") + where
    values["agent_one_node"] = shlex.join(_with_option(args, _NNODES, "1"))


def _launcher_start(argv: List[str]) -> Optional[int]:
    """Where the launcher's own command starts: `torchrun` (the interpreter running its script is
    dropped), or the interpreter of `python [-u ...] -m torch.distributed.run`."""
    for i, arg in enumerate(argv):
        if os.path.basename(arg) == "torchrun":
            return i
        if arg == "-m" and i + 1 < len(argv) and argv[i + 1] in _SCRIPT_NAMES[1:]:
            return 0
    return None


def _option(args: List[str], names) -> Optional[str]:
    for i, arg in enumerate(args):
        if _script_reached(args, i):
            return None
        for name in names:
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
            if arg == name and i + 1 < len(args):
                return args[i + 1]
    return None


def _with_option(args: List[str], names, value: str) -> List[str]:
    out, skip = [], False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if not _script_reached(args, i):
            name = next((n for n in names if arg == n or arg.startswith(n + "=")), None)
            if name is not None:
                out.append(f"{name}={value}")
                skip = arg == name
                continue
        out.append(arg)
    return out


def _script_reached(args: List[str], i: int) -> bool:
    """Past the training script: the launcher's own options end at the first `.py` argument (or `-m`
    module of the job after the launcher's name)."""
    return any(a.endswith(".py") for a in args[1:i])
