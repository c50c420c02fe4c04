"""`debug-stuck diagnose`: scripted diagnosis from answers, logs and live processes. Never prompts.

On one machine (`--pid`, `--auto`) or on every node of a job (`--slurm-job`, `--hosts`), with
targeted probes as extra evidence (`--probe`). Writes the report as text, Markdown or JSON.
"""

from __future__ import annotations

import sys

from debug_stuck.frontends.commands.common import (
    add_command,
    count,
    emit,
    number,
    pid_number,
    progress_printer,
    window_seconds,
)

MIN_LOG_BYTES = 1024
MAX_LOG_BYTES = 64 * 1024 * 1024  # the tail is held in memory and decoded whole


def register(subparsers) -> None:
    d = add_command(
        subparsers,
        "diagnose",
        run,
        help="scripted diagnosis from answers and logs; never prompts",
        description="Scripted diagnosis: answers from flags or a file, the tail of training logs. Never prompts.",
    )
    d.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a triage answer (repeatable), e.g. phase=start",
    )
    d.add_argument(
        "--pid",
        action="append",
        type=pid_number,
        default=[],
        metavar="P",
        help="a process of the hung job (repeatable)",
    )
    d.add_argument("--auto", action="store_true", help="find the training processes on this machine")
    d.add_argument(
        "--window",
        type=window_seconds,
        default=1.0,
        metavar="S",
        help="seconds between stack samples, up to 60 (default 1)",
    )
    d.add_argument(
        "--no-native",
        dest="native",
        action="store_false",
        help="Python frames only (default: native C/C++ frames too, where py-spy or pystack can read them)",
    )
    d.add_argument(
        "--probe", action="append", default=[], metavar="NAME", help="also run this targeted probe (repeatable)"
    )
    d.add_argument("--allow-exec", action="store_true", help="consent to probes that run your code")
    d.add_argument("--answers", metavar="FILE", help="YAML or JSON mapping of triage answers")
    d.add_argument(
        "--log", action="append", default=[], metavar="FILE", help="a training log to read the tail of (repeatable)"
    )
    d.add_argument(
        "--log-bytes",
        type=count(MIN_LOG_BYTES, MAX_LOG_BYTES, "bytes (64 MiB)"),
        default=None,
        metavar="N",
        help="how many bytes of each log's tail to read, 1024 to 64 MiB (default 262144)",
    )
    d.add_argument(
        "--flight-recorder",
        action="append",
        default=[],
        metavar="PATH",
        help="PyTorch Flight Recorder dumps: a folder, a prefix (/tmp/nccl_trace_rank_) or files; pickle or JSON "
        "(repeatable; a live job's own dumps are found from its environment)",
    )
    d.add_argument(
        "--debug-server",
        metavar="HOST:PORT",
        help="read every rank's stacks and Flight Recorder through torch's debug server (read-only; default port "
        "25999, found by itself when a process of the live job listens on it)",
    )
    d.add_argument(
        "--format",
        choices=("agent", "json", "markdown", "text"),
        default="text",
        help="report format (default text); agent: the compact JSON an AI agent relays (docs/contract.md)",
    )
    d.add_argument("--output", metavar="FILE", help="write the report to FILE instead of stdout")
    d.add_argument("--no-input", action="store_true", help="never prompt (diagnose never does; accepted for scripts)")
    d.add_argument("--example", metavar="NAME", help="diagnose a bundled example scenario (see --list-examples)")
    d.add_argument("--list-examples", action="store_true", help="list the bundled example scenarios")

    nodes = d.add_argument_group("many nodes")
    nodes.add_argument(
        "--slurm-job",
        metavar="JOBID",
        help="diagnose every node of this running Slurm job (a `srun --overlap` step runs `snapshot` on each)",
    )
    nodes.add_argument(
        "--hosts",
        metavar="A,B,C",
        help="diagnose over ssh on these hosts (host, user@host or host:port); with --pid, --auto (default) or "
        "--slurm-job to pick the job's processes on each",
    )
    nodes.add_argument(
        "--node-timeout",
        type=number(),
        default=None,
        metavar="S",
        help="seconds to wait for the nodes; the ones that have not answered by then are named (default 30)",
    )
    nodes.add_argument(
        "--ssh-option",
        action="append",
        default=[],
        metavar="OPT",
        help="passed to ssh as -o OPT (repeatable), e.g. IdentityFile=~/.ssh/cluster",
    )


def run(args) -> int:
    from debug_stuck.kb import load_knowledge
    from debug_stuck.pipeline import diagnose
    from debug_stuck.pipeline.options import list_examples
    from debug_stuck.render import render

    if args.list_examples:
        for name, title in list_examples().items():
            print(f"{name:28} {title}")
        return 0
    knowledge = load_knowledge()
    request = request_from_args(args, knowledge)
    report = diagnose(request, knowledge)
    say_unread_logs(report.errors, request.logs)
    emit(render(report, args.format), args.output)
    return 0


def request_from_args(args, knowledge):
    """The request every option of `diagnose` makes, the same on one node and on many."""
    from debug_stuck.pipeline.options import answered_request, host_list

    request = answered_request(knowledge, args.answer, args.answers, args.example)
    request.logs += args.log
    request.log_bytes = args.log_bytes
    request.pids = list(dict.fromkeys(args.pid))
    request.auto = args.auto
    request.window = args.window
    request.native = args.native
    request.probes = args.probe
    request.allow_exec = args.allow_exec
    request.hosts = host_list(args.hosts)
    request.slurm_job = args.slurm_job
    request.node_timeout = args.node_timeout
    request.ssh_options = list(args.ssh_option)
    request.flight_recorder = list(args.flight_recorder)
    request.debug_server = args.debug_server
    request.progress = progress_printer()
    return request


def say_unread_logs(errors, logs) -> None:
    """A --log that could not be read stays in the report's errors, and is said on stderr too: a
    report read from a FIFO, a directory or a typo is not what the user meant to ask about."""
    prefixes = tuple(f"log {path}:" for path in logs)
    for error in errors:
        if prefixes and error.startswith(prefixes):
            print(f"debug-stuck: {error}", file=sys.stderr)
