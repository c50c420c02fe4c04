"""MkDocs hook: the cause catalogue (causes.md), written from the knowledge base at build time.

`docs/causes.md` in the repository is a stub that says so; when the site is built, its Markdown is
replaced by one section per cause, read from the playbooks in `skills/` through
`debug_stuck.kb.load_knowledge`, so the catalogue can never drift from what the tool knows.
Registered in mkdocs.yml under `hooks:` (a plain Python file, not a plugin package).
"""

from __future__ import annotations

from pathlib import Path

CATALOGUE = "causes.md"

PATTERNS = {
    "A": "hangs at start",
    "B": "mid-run, GPU idle",
    "C": "mid-run, GPU busy",
    "D": "the same step every time",
    "E": "random, with hardware or network evidence",
}


def _skills_dir(config) -> Path:
    """The knowledge base of the checkout being built (beside mkdocs.yml), not an installed copy."""
    return Path(config["config_file_path"]).resolve().parent / "skills"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _applies(fix) -> str:
    """'for framework: kohya; platform: rocm' from what a fix declares it applies to."""
    parts = [f"{key}: {', '.join(values)}" for key, values in sorted(fix.applies.items()) if values]
    if fix.flag:
        parts.append(f"sets the job's `{fix.flag}`")
    return f" ({'; '.join(parts)})" if parts else ""


def catalogue(skills: Path) -> str:
    """The catalogue page's Markdown, from the playbooks in `skills`."""
    try:
        from debug_stuck.contract import CAUSE_IDS
        from debug_stuck.kb import load_knowledge
    except ImportError as exc:
        from mkdocs.exceptions import PluginError

        raise PluginError(
            f"the cause catalogue needs debug_stuck importable ({exc}): run mkdocs from the environment "
            "of the developers' setup (pip install -e '.[test]')"
        ) from exc

    knowledge = load_knowledge(skills)
    books = knowledge.playbooks
    order = [cause for cause in CAUSE_IDS if cause in books] + sorted(set(books) - set(CAUSE_IDS))
    lines = [
        "# The cause catalogue",
        "",
        f"Every cause debug-stuck can name, {len(order)} in all, one playbook each in `skills/`. This page is",
        "generated from those playbooks when the manual is built (`docs/hooks/causes.py`), so it lists",
        "exactly what the tool knows. The playbook file itself holds why it happens, how to confirm it",
        "(the checks, with their safety labels) and each fix's commands; the report fills them in for",
        "your job ([Reading a report](reports.md)).",
        "",
        "Triage patterns: "
        + "; ".join(f"**{letter}** {meaning}" for letter, meaning in PATTERNS.items())
        + " ([The knowledge base](knowledge-base.md)).",
        "",
        "| cause | what it is | phase | patterns |",
        "| --- | --- | --- | --- |",
    ]
    for cause in order:
        book = books[cause]
        patterns = ", ".join(book.patterns) or "-"
        lines.append(f"| [`{cause}`](#{cause}) | {_cell(book.title)} | {book.phase} | {patterns} |")
    for cause in order:
        book = books[cause]
        lines += [
            "",
            f"## {cause}",
            "",
            f"**{book.title}**",
            "",
            " ".join(book.summary.split()),
            "",
            f"- id: `{book.id}`; phase: {book.phase}; patterns: {', '.join(book.patterns) or 'none'}",
            f"- playbook: `{book.relative_path}`",
        ]
        frameworks = sorted({name for fix in book.fixes for name in fix.applies.get("framework", [])})
        if frameworks:
            lines.append(f"- fixes declared for frameworks: {', '.join(frameworks)}; the others apply to any job")
        if book.probes:
            lines.append("- settle it with: " + ", ".join(f"`debug-stuck probe {name}`" for name in book.probes))
        if book.fixes:
            lines += ["", "Fixes, best first:", ""]
            lines += [f"{n}. {' '.join(fix.title.split())}{_applies(fix)}" for n, fix in enumerate(book.fixes, 1)]
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown, page, config, files, **kwargs):
    if page.file.src_uri == CATALOGUE:
        return catalogue(_skills_dir(config))
    return markdown


def on_serve(server, config, builder, **kwargs):
    """`mkdocs serve` rebuilds when a playbook changes, as it does for the pages."""
    server.watch(str(_skills_dir(config)))
    return server
