"""The wheel: one import package, `debug_stuck`, with the knowledge base inside it; it works from
any directory, whatever that directory holds."""

import os
import subprocess
import sys
import zipfile

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    return next(out.glob("debug_stuck-*.whl"))


@pytest.fixture(scope="module")
def installed_wheel(wheel, tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr[-2000:]
    return target


@pytest.mark.timeout(600)
def test_the_wheel_holds_one_import_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    dist_info = {t for t in top if t.endswith(".dist-info")}
    assert top - dist_info == {"debug_stuck"}
    assert len(dist_info) == 1
    assert "debug_stuck/_data/skills/data/probes.yaml" in names
    assert "debug_stuck/_data/skills/data/xid.yaml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pth")]
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info.pop()}/entry_points.txt").decode()
    assert "debug-stuck = debug_stuck.frontends.cli:main" in entry_points


@pytest.mark.timeout(600)
def test_wheel_ships_the_knowledge_base(installed_wheel, tmp_path):
    data = installed_wheel / "debug_stuck" / "_data"
    assert (data / "SKILL.md").is_file()
    assert (data / "skills" / "tree.yaml").is_file()
    assert len(list((data / "skills").glob("*.md"))) >= 20
    env = dict(os.environ, PYTHONPATH=str(installed_wheel))
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "debug_stuck", *a], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
    )
    where = subprocess.run(
        [sys.executable, "-c", "import debug_stuck.kb as p; print(p.skills_dir())"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert where.stdout.strip() == str(data / "skills")
    check = run("skills", "check")
    assert check.returncode == 0, check.stdout + check.stderr
    example = run("diagnose", "--example", "miopen-first-batch", "--format", "json")
    assert example.returncode == 0, example.stderr
    assert '"cause": "miopen-find"' in example.stdout
