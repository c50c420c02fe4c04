"""`debug-stuck probe NAME`: run one targeted probe, bounded in time; `probe --list` shows them;
`probe NAME --help` says what that probe takes, how long it may run and what it does (probes.yaml)."""

from __future__ import annotations

import argparse
import json
import sys

from debug_stuck.frontends.commands.common import EXIT_CODES, add_command, number, pid_number, progress_printer

MAX_PROBE_TIMEOUT = 86400.0  # a day: longer is a typo, and a bound past threading's largest wait fails


class _ProbeHelp(argparse.Action):
    """-h/--help: the probe's own help when a probe is named before it, else the command's."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        name = getattr(namespace, "name", None)
        if name:
            from debug_stuck.probes.targeted.registry import REGISTRY, help_text

            if name not in REGISTRY:
                parser.error(f"no probe {name!r}; valid: {', '.join(REGISTRY)}")
            # the command's epilog: the exit codes, and the manual page the CLI adds to every help
            sys.stdout.write(help_text(name) + "\n" + (parser.epilog or EXIT_CODES) + "\n")
            parser.exit(0)
        parser.print_help()
        parser.exit(0)


def register(subparsers) -> None:
    pr = add_command(
        subparsers,
        "probe",
        run,
        help="run one targeted probe (probe --list shows them)",
        description="Run one targeted probe, bounded in time. Probes that run your code need --allow-exec.\n"
        "Give a launch command after --: debug-stuck probe nccl-debug-run --allow-exec -- torchrun ... train.py\n"
        "'debug-stuck probe NAME --help' shows one probe's inputs, time limit and what it does.",
        add_help=False,
    )
    pr.add_argument("-h", "--help", action=_ProbeHelp, help="show this help (after NAME: that probe's own) and exit")
    pr.add_argument("name", nargs="?", metavar="NAME", help="the probe to run")
    pr.add_argument("--list", action="store_true", help="list the probes, one line each")
    pr.add_argument(
        "--timeout",
        type=number(0, MAX_PROBE_TIMEOUT, above=True),
        metavar="S",
        help="time limit in seconds (default: the probe's own)",
    )
    pr.add_argument("--allow-exec", action="store_true", help="consent to running your code or command")
    pr.add_argument("--format", choices=("json", "text"), default="text")
    pr.add_argument("--pid", action="append", type=pid_number, default=[], metavar="P", help="a process of the job")
    pr.add_argument("--path", action="append", default=[], metavar="DIR", help="a path the job reads or writes")
    pr.add_argument("--factory", metavar="MODULE:FUNC", help="dataloader: returns your Dataset or DataLoader")
    pr.add_argument("--script", metavar="FILE", help="gc: the script to run under GC timing")
    pr.add_argument("--num-workers", type=int, metavar="N", help="dataloader: num_workers to test (default: yours)")
    pr.add_argument(
        "--batches", type=int, default=5, metavar="N", help="dataloader: batches to fetch, 1 or more (default 5)"
    )


def run(args) -> int:
    from debug_stuck.errors import BadInput
    from debug_stuck.probes.targeted.base import ProbeContext, ProbeUsageError
    from debug_stuck.probes.targeted.registry import INPUT_HELP, list_probes, probe_spec, run_probe

    try:
        if args.list:
            for p in list_probes():
                consent = "; needs --allow-exec" if p["runs_user_code"] else ""
                print(f"{p['name']:15} {p['summary']}")
                print(f"{'':15} [{p['safety']['text']}{consent}: {p['safety']['note']}]")
                for mode in p["modes"]:
                    consent = "needs --allow-exec" if mode["runs_user_code"] else "no --allow-exec"
                    text = mode["safety"]["text"]
                    given = " ".join(INPUT_HELP[i][0].split()[0] for i in mode["when"])
                    print(f"{'':15} [with {given} alone: {text}, {consent}: {mode['safety']['note']}]")
            return 0
        if not args.name:
            raise BadInput("which probe?", "give a NAME; 'debug-stuck probe --list' shows them")
        spec = probe_spec(args.name)
        timeout = args.timeout if args.timeout is not None else spec.timeout
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
            where = f" [{f.cause}]" if f.cause else f" (see: {f.see})" if f.see else ""
            print(f"  - {f.severity}: {f.message}{where}")
    return 0
