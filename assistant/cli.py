"""The `debug-stuck` command line. Thin: parsing and exit codes here, work in the core.

Only argparse is imported at start-up, so `--help` and `--version` answer at once; everything
else is imported inside the command that needs it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from assistant import __version__

EXIT_CODES = """exit codes:
  0  a report was written (or the command did what it says)
  1  skills check found problems in the knowledge base
  2  bad usage or bad input (one line on stderr: what, and what is valid)
  3  the target could not be inspected (gone, or permission denied)
  4  stop: processes were still alive after SIGKILL (uninterruptible sleep; listed in the output)
  124  watch: the job stalled and watch ended it (--on-hang stop, or restart gave up)
  128+N  watch: got signal N and passed it on to the job it launched"""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="debug-stuck",
        description="Find out why a training job stopped moving, and get it going again.\n"
        "Without a command: the guided session (Textual TUI on a terminal; --plain for simple prompts).",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"debug-stuck {__version__}")
    from assistant import interactive_cli

    interactive_cli.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    d = sub.add_parser(
        "diagnose",
        help="scripted diagnosis from answers and logs; never prompts",
        description="Scripted diagnosis: answers from flags or a file, the tail of training logs. Never prompts.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a triage answer (repeatable), e.g. phase=start",
    )
    d.add_argument(
        "--pid", action="append", type=int, default=[], metavar="P", help="a process of the hung job (repeatable)"
    )
    d.add_argument("--auto", action="store_true", help="find the training processes on this machine")
    d.add_argument("--window", type=float, default=1.0, metavar="S", help="seconds between stack samples (default 1)")
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
        type=int,
        default=None,
        metavar="N",
        help="how many bytes of each log's tail to read (default 262144)",
    )
    d.add_argument(
        "--format", choices=("json", "markdown", "text"), default="text", help="report format (default text)"
    )
    d.add_argument("--output", metavar="FILE", help="write the report to FILE instead of stdout")
    d.add_argument("--no-input", action="store_true", help="never prompt (diagnose never does; accepted for scripts)")
    d.add_argument("--example", metavar="NAME", help="diagnose a bundled example scenario (see --list-examples)")
    d.add_argument("--list-examples", action="store_true", help="list the bundled example scenarios")

    from assistant.multinode_cli import add_diagnose_arguments, add_snapshot_parser

    add_diagnose_arguments(d)
    add_snapshot_parser(sub)
    from assistant import recovery_cli, watch_cli

    recovery_cli.add_parser(sub)
    watch_cli.add_parser(sub)

    m = sub.add_parser(
        "demo",
        help="start a bundled job that really hangs, diagnose it live, clean up",
        description="Start a bundled job that really hangs, diagnose it live, show the report, clean up.",
    )
    m.add_argument("scenario", nargs="?", metavar="SCENARIO", help="which hang (see --list; default: straggler)")
    m.add_argument("--list", action="store_true", help="list the scenarios")
    m.add_argument("--format", choices=("json", "markdown", "text"), default="text")

    pr = sub.add_parser(
        "probe",
        help="run one targeted probe (probe --list shows them)",
        description="Run one targeted probe, bounded in time. Probes that run your code need --allow-exec.\n"
        "Give a launch command after --: debug-stuck probe nccl-debug-run --allow-exec -- torchrun ... train.py",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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

    s = sub.add_parser("skills", help="check or install the knowledge base and the agent skill")
    ssub = s.add_subparsers(dest="skills_command", metavar="ACTION", parser_class=_Parser)
    c = ssub.add_parser("check", help="validate every playbook and the decision tree")
    c.add_argument("--dir", metavar="DIR", help="the skills folder to check (default: the installed one)")
    c.add_argument("--format", choices=("json", "text"), default="text")
    i = ssub.add_parser("install", help="install the agent skill folder (SKILL.md + playbooks)")
    i.add_argument("--dest", metavar="DIR", help="destination (default ~/.claude/skills/debug-stuck)")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    launch: List[str] = []
    if "--" in argv:  # everything after -- is the user's command, never our options
        cut = argv.index("--")
        argv, launch = argv[:cut], argv[cut + 1 :]
    args = parser.parse_args(argv)
    args.launch = launch
    from assistant.errors import DebugStuckError

    try:
        if args.command == "diagnose":
            return _diagnose(args)
        if args.command == "demo":
            return _demo(args)
        if args.command in ("watch", "history"):
            from assistant.watch_cli import run as run_watch

            return run_watch(args)
        if args.command in ("resume", "stop"):
            from assistant.recovery_cli import run

            return run(args)
        if args.command == "snapshot":
            from assistant.multinode_cli import run_snapshot

            return run_snapshot(args)
        if args.command == "probe":
            return _probe(args)
        if args.command == "skills":
            if args.skills_command == "check":
                return _skills_check(args)
            if args.skills_command == "install":
                return _skills_install(args)
            parser.parse_args(["skills", "--help"])
        if args.command is None:
            from assistant import interactive_cli

            return interactive_cli.run(args)
        parser.print_help()
        return 0
    except DebugStuckError as exc:
        print(f"debug-stuck: error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("debug-stuck: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); nothing more to say.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


def _diagnose(args) -> int:
    from assistant.answers import load_answers_file, merge, parse_answer_flags
    from assistant.diagnose import DiagnoseRequest, list_examples, load_example, run_diagnosis
    from assistant.errors import BadInput
    from assistant.kb import load_knowledge

    if args.list_examples:
        for name, title in list_examples().items():
            print(f"{name:28} {title}")
        return 0
    if args.log_bytes is not None and args.log_bytes < 1024:
        raise BadInput(f"--log-bytes {args.log_bytes} is too small", "give at least 1024")
    knowledge = load_knowledge()
    questions = knowledge.tree.questions
    request = load_example(knowledge, args.example) if args.example else DiagnoseRequest()
    file_answers = load_answers_file(questions, args.answers) if args.answers else {}
    flag_answers = parse_answer_flags(questions, args.answer)
    request.answers = merge(request.answers, file_answers, flag_answers)
    request.logs += args.log
    request.log_bytes = args.log_bytes
    if args.window <= 0 or args.window > 60:
        raise BadInput(f"--window {args.window} is out of range", "give seconds between 0.1 and 60")
    request.pids = list(dict.fromkeys(args.pid))
    request.auto = args.auto
    request.window = args.window
    request.native = args.native
    request.probes = args.probe
    request.allow_exec = args.allow_exec
    if sys.stderr.isatty():
        request.progress = lambda msg: print(f"debug-stuck: {msg}...", file=sys.stderr)
    from assistant.multinode_cli import run_multinode

    report = run_multinode(args, knowledge, request.answers) or run_diagnosis(request, knowledge)
    _emit(render(report, args.format), args.output)
    return 0


def _demo(args) -> int:
    from assistant.demo import list_scenarios, run_demo, stderr_say

    if args.list:
        sys.stdout.write(list_scenarios())
        return 0
    text = run_demo(args.scenario, lambda report: render(report, args.format), stderr_say)
    sys.stdout.write(text)
    return 0


def _probe(args) -> int:
    import json

    from assistant.errors import BadInput
    from probes.targeted import ProbeContext, ProbeUsageError, list_probes, probe_module, run_probe

    try:
        if args.list:
            for p in list_probes():
                consent = "  [runs your code: --allow-exec]" if p["runs_user_code"] else ""
                print(f"{p['name']:15} {p['summary']}{consent}")
            return 0
        if not args.name:
            raise BadInput("which probe?", "give a NAME; 'debug-stuck probe --list' shows them")
        module = probe_module(args.name)
        command = args.launch
        timeout = args.timeout if args.timeout is not None else module.DEFAULT_TIMEOUT
        if timeout <= 0:
            raise BadInput(f"--timeout {timeout} must be positive", "give seconds, e.g. --timeout 60")
        ctx = ProbeContext(
            timeout=timeout,
            allow_exec=args.allow_exec,
            command=command,
            pids=args.pid,
            paths=args.path,
            factory=args.factory,
            script=args.script,
            num_workers=args.num_workers,
            batches=args.batches,
        )
        if sys.stderr.isatty():
            ctx.progress = lambda msg: print(f"debug-stuck: {msg}...", file=sys.stderr)
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


def render(report, fmt: str) -> str:
    if fmt == "json":
        import json

        return json.dumps(report.to_dict(), indent=2) + "\n"
    if fmt == "markdown":
        from assistant.render_markdown import render_markdown

        return render_markdown(report)
    from assistant.render_text import render_text

    return render_text(report)


def _emit(text: str, output: Optional[str]) -> None:
    if not output:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from assistant.errors import BadInput
    from assistant.paths import write_text_atomic

    try:
        write_text_atomic(output, text)
    except OSError as exc:
        raise BadInput(f"cannot write {output}: {exc.strerror}", "give a writable path for --output") from None
    print(f"report written to {output}", file=sys.stderr)


def _skills_check(args) -> int:
    import json
    from pathlib import Path

    from assistant.kb import check_knowledge

    knowledge, problems = check_knowledge(Path(args.dir) if args.dir else None)
    if args.format == "json":
        print(json.dumps({"ok": not problems, "problems": [str(p) for p in problems]}, indent=2))
    elif problems:
        for problem in problems:
            print(problem)
        print(f"{len(problems)} problem(s) found", file=sys.stderr)
    else:
        n_signals = sum(len(b.signals) for b in knowledge.playbooks.values())
        n_fixes = sum(len(b.fixes) for b in knowledge.playbooks.values())
        print(
            f"ok: {len(knowledge.playbooks)} playbooks, {n_signals} signals, {n_fixes} fixes; "
            f"tree: {len(knowledge.tree.questions)} questions, {len(knowledge.tree.nodes)} nodes"
        )
    return 1 if problems else 0


def _skills_install(args) -> int:
    from assistant.install import install_skill

    result = install_skill(args.dest)
    print(result.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
