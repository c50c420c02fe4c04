import re
import subprocess
import sys

from conftest import REPO, run_subprocess


def test_version_and_help(cli):
    code, out, _ = cli("--version")
    assert code == 0 and out.startswith("debug-stuck ")
    code, out, _ = cli("--help")
    assert code == 0
    for command in ("diagnose", "skills"):
        assert command in out
    assert "exit codes" in out


def test_help_and_version_import_no_heavy_modules():
    # --help must stay fast: the UI toolkits, NVML, YAML and Markdown load only when used.
    probe = (
        "import sys, contextlib, io\n"
        "from debug_stuck.frontends.cli import main\n"
        "for args in (['--version'], ['--help'], ['diagnose', '--help']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try: main(args)\n"
        "        except SystemExit: pass\n"
        "heavy = ('textual', 'questionary', 'pynvml', 'yaml', 'markdown_it', 'psutil')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_usage_error_is_one_line_exit_2():
    proc = run_subprocess("diagnose", "--format", "xml")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "invalid choice" in lines[0] and "json" in lines[0]


def test_unknown_command_exit_2():
    proc = run_subprocess("frobnicate")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def _helps():
    """(argv, ) for `--help` of the program, every command, every action below one (skills check)
    and every probe (`probe NAME --help` has a help of its own)."""
    import argparse

    from debug_stuck.frontends.cli import build_parser
    from debug_stuck.probes.targeted.registry import REGISTRY

    def walk(parser, words):
        yield words
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    yield from walk(child, [*words, name])

    yield from walk(build_parser(), [])
    for name in REGISTRY:
        yield ["probe", name]


def test_every_help_ends_with_the_manual_page_that_explains_it(cli):
    seen = 0
    for words in _helps():
        code, out, _ = cli(*words, "--help")
        assert code == 0, words
        last = out.rstrip().splitlines()[-1]
        assert last.startswith("manual: docs/"), (words, last)
        pages = re.findall(r"(docs/[\w./-]+\.md) \(([^)]+)\)", last)
        assert pages, (words, last)
        for path, title in pages:
            page = REPO / path
            assert page.is_file(), (words, path)
            heading = page.read_text(encoding="utf-8").splitlines()[0]
            assert heading == f"# {title}", (words, path, heading)  # the page's own title
        seen += 1
    assert seen > 15
