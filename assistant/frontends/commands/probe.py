"""`debug-stuck probe NAME`: run one targeted probe, bounded in time; `probe --list` shows them."""

from __future__ import annotations

import json

from debug_stuck.frontends.commands.common import add_command, progress_printer


def register(subparsers) -> None:
    pr = add_command(
        subparsers,
        "probe",
        run,
        help="run one targeted probe (probe --list shows them)",
        description="Run one targeted probe, bounded in time. Probes that run your code need --allow-exec.\n"
        "Give a launch command after --: debug-stuck probe nccl-debug-run --allow-exec -- torchrun ... train.py",
    )
    pr.add_argument("name", nargs="?", metavar="NAME", help="the probe to run")
    pr.add_argument("--list", action="store_true", help="list the probes, one line each")
    pr.add_argument("--timeout", type=float, metavar="S", help="time limit in seconds (default: the probe's own)")
    pr.add_argument("--allow-exec", action="store_true", help="consent to running your code or command")
    pr.add_argument("--format", choices=("json", "text"), default="text")
    pr.add_argument("--pid", action="append", type=int, default=[], metavar="P", help="a process of the job")
    pr.add_argument("--path", action="append", default=[], metavar="DIR", help="a path the job reads or writes")
    pr.add_argument("--factory", metavar="MODULE:FUNC", help="dataloader: returns your Dataset or DataLoader")
    pr.add_argument("--script", metavar="FILE", help="gc: the script to run under GC timing")
    pr.add_argument("--num-workers", type=int, metavar="N", help="dataloader: num_workers to test (default: yours)")
    pr.add_argument("--batches", type=int, default=5, metavar="N", help="dataloader: batches to fetch (default 5)")


def run(args) -> int:
    from debug_stuck.errors import BadInput
    from debug_stuck.probes.targeted.base import ProbeContext, ProbeUsageError
    from debug_stuck.probes.targeted.registry import list_probes, probe_spec, run_probe

    try:
        if args.list:
            for p in list_probes():
                consent = "; needs --allow-exec" if p["runs_user_code"] else ""
                print(f"{p['name']:15} {p['summary']}")
                print(f"{'':15} [{p['safety']['text']}{consent}: {p['safety']['note']}]")
            return 0
        if not args.name:
            raise BadInput("which probe?", "give a NAME; 'debug-stuck probe --list' shows them")
        spec = probe_spec(args.name)
        timeout = args.timeout if args.timeout is not None else spec.timeout
        if timeout <= 0:
            raise BadInput(f"--timeout {timeout} must be positive", "give seconds, e.g. --timeout 60")
        ctx = ProbeContext(
            timeout=timeout,
            allow_exec=args.allow_exec,
            command=args.launch,
            pids=args.pid,
            paths=args.path,
            factory=args.factory,
            script=args.script,
            num_workers=args.num_workers,
            batches=args.batches,
        )
        say = progress_printer()
        if say is not None:
            ctx.progress = say
        result = run_probe(args.name, ctx)
    except ProbeUsageError as exc:
        raise BadInput(str(exc)) from None
    if args.format == "json":
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(f"probe {result.name}: {result.status.upper()} ({result.seconds:.1f} s): {result.summary}")
        for f in result.findings:
            where = f" [{f.cause}]" if f.cause else ""
            print(f"  - {f.severity}: {f.message}{where}")
    return 0
