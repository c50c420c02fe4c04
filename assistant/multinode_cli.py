"""Command-line surface of multi-node diagnosis: `debug-stuck snapshot`, and the diagnose flags
`--slurm-job`, `--hosts`, `--node-timeout`, `--ssh-option`.

Wiring (assistant/cli.py):
- `add_snapshot_parser(sub)` in build_parser, and `if args.command == "snapshot": return run_snapshot(args)`;
- `add_diagnose_arguments(d)` on the diagnose parser, and in _diagnose, once the answers are merged:
  `report = run_multinode(args, knowledge, request.answers)`; when it returns None (neither flag
  given), run the single-machine diagnosis as before.

`python -m assistant.multinode_cli snapshot ...` also works, for nodes whose `debug-stuck` has this
module but not yet the subcommand.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List, Optional

from assistant.errors import BadInput, DebugStuckError

MAX_NODE_TIMEOUT = 3600.0


def add_snapshot_parser(subparsers) -> None:
    s = subparsers.add_parser(
        "snapshot",
        help="this node's raw evidence for a job, as compact JSON (for multi-node collection)",
        description="Collect this node's live evidence for a job (processes, stacks, GPUs, kernel log), bounded "
        "in time, and print it as one line of compact JSON. No classification: `debug-stuck diagnose "
        "--slurm-job J` or `--hosts a,b` runs this on every node and classifies the whole job.",
    )
    s.add_argument(
        "--pid", action="append", type=int, default=[], metavar="P", help="a process of the job (repeatable)"
    )
    s.add_argument("--auto", action="store_true", help="find the training processes on this machine")
    s.add_argument("--slurm-job", metavar="JOBID", help="the processes of this Slurm job (by SLURM_JOB_ID)")
    s.add_argument("--format", choices=("json",), default="json", help="output format (json: one line)")
    s.add_argument("--window", type=float, default=1.0, metavar="S", help="seconds between stack samples (default 1)")
    s.add_argument("--no-native", dest="native", action="store_false", help="Python frames only")


def run_snapshot(args) -> int:
    from assistant.multinode import JOB_ID, node_name, take_snapshot
    from assistant.snapshot_io import error_to_wire

    if not (args.pid or args.auto or args.slurm_job):
        raise BadInput("which job?", "give --pid P, --auto or --slurm-job JOBID")
    if args.window <= 0 or args.window > 60:
        raise BadInput(f"--window {args.window} is out of range", "give seconds between 0.1 and 60")
    if args.slurm_job and not JOB_ID.match(args.slurm_job):
        raise BadInput(f"--slurm-job {args.slurm_job!r} is not a Slurm job id", "give the number squeue shows")
    try:
        wire = take_snapshot(
            pids=list(dict.fromkeys(args.pid)),
            auto=args.auto,
            slurm_job=args.slurm_job,
            window=args.window,
            native=args.native,
        )
        code = 0
    except DebugStuckError as exc:
        # The collector on the other end still learns which node said what.
        wire = error_to_wire(exc.one_line(), exc.exit_code, node=node_name(), job=args.slurm_job)
        print(f"debug-stuck: error: {exc.one_line()}", file=sys.stderr)
        code = exc.exit_code
    sys.stdout.write(json.dumps(wire, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return code


def add_diagnose_arguments(parser) -> None:
    group = parser.add_argument_group("many nodes")
    group.add_argument(
        "--slurm-job",
        metavar="JOBID",
        help="diagnose every node of this running Slurm job (a `srun --overlap` step runs `snapshot` on each)",
    )
    group.add_argument(
        "--hosts",
        metavar="A,B,C",
        help="diagnose over ssh on these hosts (host, user@host or host:port); with --pid, --auto (default) or "
        "--slurm-job to pick the job's processes on each",
    )
    group.add_argument(
        "--node-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds to wait for the nodes; the ones that have not answered by then are named (default 30)",
    )
    group.add_argument(
        "--ssh-option",
        action="append",
        default=[],
        metavar="OPT",
        help="passed to ssh as -o OPT (repeatable), e.g. IdentityFile=~/.ssh/cluster",
    )


def run_multinode(args, knowledge, answers: Dict) -> Optional[object]:
    """The multi-node report when --slurm-job or --hosts is given, else None."""
    from assistant.multinode import (
        DEFAULT_NODE_TIMEOUT,
        collect_hosts,
        collect_slurm,
        diagnose_merged,
        parse_hosts,
    )

    slurm_job = getattr(args, "slurm_job", None)
    hosts_text = getattr(args, "hosts", None)
    if not slurm_job and not hosts_text:
        return None
    timeout = getattr(args, "node_timeout", None)
    timeout = DEFAULT_NODE_TIMEOUT if timeout is None else timeout
    if timeout <= 0 or timeout > MAX_NODE_TIMEOUT:
        raise BadInput(
            f"--node-timeout {timeout:g} is out of range", f"give seconds between 1 and {MAX_NODE_TIMEOUT:g}"
        )
    window = getattr(args, "window", 1.0)
    native = getattr(args, "native", True)
    pids: List[int] = list(dict.fromkeys(getattr(args, "pid", None) or []))
    progress = None
    if sys.stderr.isatty():

        def progress(msg: str) -> None:
            print(f"debug-stuck: {msg}...", file=sys.stderr)

    if hosts_text:
        hosts = parse_hosts(hosts_text)
        targets = pids or "auto"
        merged = collect_hosts(
            hosts,
            targets,
            timeout,
            window=window,
            native=native,
            ssh_options=getattr(args, "ssh_option", None) or [],
            slurm_job=slurm_job,
            progress=progress,
        )
    else:
        if pids or getattr(args, "auto", False):
            raise BadInput(
                "--slurm-job finds the job's processes on every node by itself", "leave out --pid and --auto"
            )
        merged = collect_slurm(slurm_job, timeout, window=window, native=native, progress=progress)
    if progress:
        progress("classifying")
    return diagnose_merged(merged, knowledge, answers, logs=list(getattr(args, "log", None) or []))


def main(argv: Optional[List[str]] = None) -> int:
    """`python -m assistant.multinode_cli snapshot ...`: the snapshot command on its own."""
    parser = argparse.ArgumentParser(prog="debug-stuck")
    add_snapshot_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return run_snapshot(args)
    except DebugStuckError as exc:
        print(f"debug-stuck: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
