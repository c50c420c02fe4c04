"""The front page and the manual: README.md stays a front page (at most 10 KB) that links into the
manual; the manual (mkdocs.yml, docs/) builds with strict warnings (a broken link, an anchor that
does not exist or a page missing from the navigation fails it); every page the manual promises is
in its navigation; the cause catalogue, generated from skills/ at build time, lists every cause."""

import os
import re
import subprocess
import sys

import pytest
import yaml

from conftest import REPO
from debug_stuck.contract import CAUSE_IDS

README = REPO / "README.md"
MKDOCS = REPO / "mkdocs.yml"

# The manual's pages (issue 29): what each covers, and its file under docs/.
PAGES = {
    "getting started": "getting-started.md",
    "attach to a job": "attach.md",
    "reading a report": "reports.md",
    "PyTorch's own evidence (Flight Recorder, debug server, NCCL RAS)": "pytorch-evidence.md",
    "the session's keys": "session.md",
    "probes": "probes.md",
    "permissions, containers and the hook": "permissions.md",
    "recovery": "recovery.md",
    "many nodes": "multinode.md",
    "the agent skill": "agents.md",
    "the JSON contract": "contract.md",
    "the knowledge base": "knowledge-base.md",
    "the cause catalogue": "causes.md",
    "measured accuracy and performance": "measured.md",
    "development": "development.md",
}


class _Loader(yaml.SafeLoader):
    """mkdocs.yml may hold MkDocs' own tags (!ENV, !relative); the nav does not need them."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def nav_files():
    config = yaml.load(MKDOCS.read_text(encoding="utf-8"), Loader=_Loader)
    found = []

    def walk(entry):
        if isinstance(entry, str):
            found.append(entry)
        elif isinstance(entry, list):
            for item in entry:
                walk(item)
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)

    walk(config["nav"])
    return config, found


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(MKDOCS), "--site-dir", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return out


def test_the_manual_builds_with_strict_warnings(site):
    assert (site / "index.html").is_file()
    for page in PAGES.values():
        assert (site / page.replace(".md", "") / "index.html").is_file(), page
    assert (site / "report.schema.json").is_file()  # copied as a file, not a page
    assert not (site / "hooks").exists()  # the hook's source is not published


def test_every_page_of_the_manual_is_in_its_navigation():
    config, files = nav_files()
    assert config["docs_dir"] == "docs"
    for what, page in PAGES.items():
        assert page in files, f"{what}: {page} is not in mkdocs.yml's nav"
        assert (REPO / "docs" / page).is_file(), page
    for file in files:
        assert (REPO / "docs" / file).is_file(), file


def test_the_readme_is_a_front_page_that_links_into_the_manual():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= 10240, f"README.md is {len(text.encode())} bytes; the detail goes in docs/"
    linked = set(re.findall(r"\]\((docs/[\w./-]+\.md)(?:#[\w-]+)?\)", text))
    assert "docs/index.md" in linked or "docs/getting-started.md" in linked
    assert len(linked) >= 8, linked
    for path in linked:
        assert (REPO / path).is_file(), path
    # the developers' setup, as .ci/run runs it, and the install of the tool on its own
    assert "pip install -e '.[test]' && python -m pytest -q" in text
    assert "pipx install ." in text
    assert "```console\n$ debug-stuck demo deadlock" in text


def test_the_cause_catalogue_lists_every_cause(site):
    stub = (REPO / "docs" / "causes.md").read_text(encoding="utf-8")
    assert "generated at build time" in stub
    assert not any(f"## {cause}" in stub for cause in CAUSE_IDS)  # no stale copy in the repository
    page = (site / "causes" / "index.html").read_text(encoding="utf-8")
    for cause in CAUSE_IDS:
        assert f'id="{cause}"' in page, cause
        assert f"skills/{cause}.md" in page, cause
