"""`debug-stuck skills check|install`: validate the knowledge base; install the agent skill folder."""

from __future__ import annotations

import json
import sys

from debug_stuck.frontends.commands.common import Parser, add_command


def register(subparsers) -> None:
    s = add_command(subparsers, "skills", run, help="check or install the knowledge base and the agent skill")
    actions = s.add_subparsers(dest="skills_command", metavar="ACTION", parser_class=Parser)
    c = actions.add_parser("check", help="validate every playbook, the decision tree and the data tables")
    c.add_argument("--dir", metavar="DIR", help="the skills folder to check (default: the installed one)")
    c.add_argument("--format", choices=("json", "text"), default="text")
    i = actions.add_parser("install", help="install the agent skill folder (SKILL.md + playbooks)")
    i.add_argument("--dest", metavar="DIR", help="destination (default ~/.claude/skills/debug-stuck)")
    i.add_argument("--force", action="store_true", help="replace files you edited there (backing them up first)")
    s.set_defaults(skills_parser=s)


def run(args) -> int:
    if args.skills_command == "check":
        return _check(args)
    if args.skills_command == "install":
        return _install(args)
    args.skills_parser.print_help()
    return 0


def _check(args) -> int:
    from pathlib import Path

    from debug_stuck.kb import check_knowledge

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


def _install(args) -> int:
    from debug_stuck.frontends.skill_install import install_skill

    result = install_skill(args.dest, force=args.force)
    print(result.summary())
    return 0
