"""The knowledge base must be found from an installed wheel, not only from a checkout."""

import os
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(out.glob("debug_stuck-*.whl"))
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
def test_wheel_ships_the_knowledge_base(installed_wheel, tmp_path):
    data = installed_wheel / "assistant" / "_data"
    assert (data / "SKILL.md").is_file()
    assert (data / "skills" / "tree.yaml").is_file()
    assert len(list((data / "skills").glob("*.md"))) >= 20
    env = dict(os.environ, PYTHONPATH=str(installed_wheel))
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "assistant", *a], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
    )
    where = subprocess.run(
        [sys.executable, "-c", "import assistant.paths as p; print(p.skills_dir())"],
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
