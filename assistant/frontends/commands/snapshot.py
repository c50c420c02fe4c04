"""`debug-stuck snapshot`: this node's raw evidence for a job, as one line of compact JSON.

No classification: `debug-stuck diagnose --slurm-job J` or `--hosts a,b` runs this on every node
(as `python -m debug_stuck snapshot ...`) and classifies the whole job where it was asked.
"""

from __future__ import annotations

import json
import sys

from debug_stuck.frontends.commands.common import add_command, pid_number, window_seconds


def register(subparsers) -> None:
    s = add_command(
        subparsers,
        "snapshot",
        run,
        help="this node's raw evidence for a job, as compact JSON (for multi-node collection)",
        description="Collect this node's live evidence for a job (processes, stacks, GPUs, kernel log), bounded "
        "in time, and print it as one line of compact JSON. No classification: `debug-stuck diagnose "
        "--slurm-job J` or `--hosts a,b` runs this on every node and classifies the whole job.",
    )
    s.add_argument(
        "--pid", action="append", type=pid_number, default=[], metavar="P", help="a process of the job (repeatable)"
    )
    s.add_argument("--auto", action="store_true", help="find the training processes on this machine")
    s.add_argument("--slurm-job", metavar="JOBID", help="the processes of this Slurm job (by SLURM_JOB_ID)")
    s.add_argument("--format", choices=("json",), default="json", help="output format (json: one line)")
    s.add_argument(
        "--window", type=window_seconds, default=1.0, metavar="S", help="seconds between stack samples (default 1)"
    )
    s.add_argument("--no-native", dest="native", action="store_false", help="Python frames only")


def run(args) -> int:
    from debug_stuck.errors import BadInput
    from debug_stuck.pipeline.look import node_snapshot

    if not (args.pid or args.auto or args.slurm_job):
        raise BadInput("which job?", "give --pid P, --auto or --slurm-job JOBID")
    pids = list(dict.fromkeys(args.pid))
    wire, code, error = node_snapshot(pids, args.auto, args.slurm_job, args.window, args.native)
    if error:  # the collector on the other end still learns which node said what
        print(f"debug-stuck: error: {error}", file=sys.stderr)
    sys.stdout.write(json.dumps(wire, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return code
