"""Files are written safely, and nothing from the command line becomes an option of another program.

- Every report goes through one writer: a private (0600) temp file with a random name in the
  target's folder, fsync, rename; a symbolic link at the target is refused, never followed.
- `skills install` writes and deletes only inside its destination, never through a link, and
  keeps the user's edits.
- `--hosts` refuses a host that ssh would read as an option, and ssh's options end before the host.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from debug_stuck.errors import BadInput
from debug_stuck.frontends.skill_install import MANIFEST, install_skill
from debug_stuck.live.ssh import parse_hosts, ssh_argv
from debug_stuck.writer import open_private_append, write_file


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# -- the writer -------------------------------------------------------------------------------------


def test_a_report_is_private_and_whole(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    os.chmod(target, 0o644)
    assert write_file(str(target), '{"new": true}\n') == str(target)
    assert target.read_text() == '{"new": true}\n' and mode(target) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # no temp file left


def test_a_symlink_at_the_target_is_refused_and_its_target_untouched(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = tmp_path / "report.md"
    link.symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        write_file(str(link), "report")
    assert victim.read_text() == "precious" and link.is_symlink()


def test_predictable_temp_names_cannot_be_hijacked(tmp_path, monkeypatch):
    """The old writer used PATH.tmp-PID; links planted at every such name change nothing now."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "out.json"
    for pid in range(os.getpid() - 50, os.getpid() + 50):
        (tmp_path / f"out.json.tmp-{pid}").symlink_to(victim)
        (tmp_path / f".out.json.tmp-{pid}").symlink_to(victim)
    write_file(str(target), "{}\n")
    assert victim.read_text() == "precious" and target.read_text() == "{}\n" and not target.is_symlink()


def test_a_write_that_fails_leaves_nothing_behind(tmp_path, monkeypatch):
    """A rename that fails (another file system, a full disk) leaves the old file and no temp file."""
    target = tmp_path / "x.json"
    target.write_text("old")

    def refuse(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        write_file(str(target), "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"] and target.read_text() == "old"
    with pytest.raises(OSError):
        write_file(str(tmp_path / "missing-folder" / "x.json"), "{}")


def test_appends_are_private_and_never_through_a_link(tmp_path):
    log = tmp_path / "job.log"
    os.close(open_private_append(str(log)))
    assert mode(log) == 0o600
    (tmp_path / "elsewhere").write_text("x")
    (tmp_path / "link.log").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="symbolic link"):
        open_private_append(str(tmp_path / "link.log"))


def test_diagnose_output_through_a_symlink_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out.json").symlink_to(victim)
    result = subprocess.run(
        [sys.executable, "-m", "debug_stuck", "diagnose", "--example", "miopen-first-batch", "--format", "json",
         "--output", str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2 and "symbolic link" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert victim.read_text() == "precious"
    ok = subprocess.run(
        [sys.executable, "-m", "debug_stuck", "diagnose", "--example", "miopen-first-batch", "--format", "json",
         "--output", str(tmp_path / "real.json")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ok.returncode == 0 and mode(tmp_path / "real.json") == 0o600


# -- skills install ---------------------------------------------------------------------------------


def test_install_is_idempotent_and_records_hashes(tmp_path):
    dest = tmp_path / "skill"
    first = install_skill(str(dest))
    assert first.written and not first.unchanged and (dest / "SKILL.md").is_file()
    again = install_skill(str(dest))
    assert not again.written and again.unchanged == first.written
    lines = (dest / MANIFEST).read_text().splitlines()
    assert lines and all(len(line.split("  ", 1)[0]) == 64 for line in lines)


def test_manifest_entries_outside_the_destination_are_never_deleted(tmp_path):
    dest = tmp_path / "skill"
    install_skill(str(dest))
    outside = tmp_path / "x"
    outside.write_text("mine")
    absolute = tmp_path / "abs"
    absolute.write_text("mine too")
    manifest = dest / MANIFEST
    manifest.write_text(manifest.read_text() + f"../x\n{absolute}\nskills/../../x\n")
    result = install_skill(str(dest))
    assert outside.read_text() == "mine" and absolute.read_text() == "mine too"
    assert set(result.ignored) == {"../x", str(absolute), "skills/../../x"}


def test_a_user_edit_is_kept_unless_forced_then_backed_up(tmp_path):
    dest = tmp_path / "skill"
    install_skill(str(dest))
    skill = dest / "SKILL.md"
    skill.write_text("my own notes\n")
    with pytest.raises(BadInput, match="you edited SKILL.md"):
        install_skill(str(dest))
    assert skill.read_text() == "my own notes\n"
    result = install_skill(str(dest), force=True)
    backup = dest / result.backed_up[0]
    assert backup.read_text() == "my own notes\n" and skill.read_text() != "my own notes\n"


def test_a_symlinked_skills_folder_is_refused(tmp_path):
    dest = tmp_path / "skill"
    dest.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (dest / "skills").symlink_to(elsewhere)
    with pytest.raises(BadInput, match="symbolic link"):
        install_skill(str(dest))
    assert list(elsewhere.iterdir()) == [] and not (dest / "SKILL.md").exists()


def test_the_cli_says_force_in_one_line(tmp_path, cli):
    dest = tmp_path / "skill"
    assert cli("skills", "install", "--dest", dest)[0] == 0
    (dest / "SKILL.md").write_text("edited\n")
    code, _, err = cli("skills", "install", "--dest", dest)
    assert code == 2 and "--force" in err and len(err.strip().splitlines()) == 1
    code, out, _ = cli("skills", "install", "--dest", dest, "--force")
    assert code == 0 and "your edits kept as SKILL.md.bak-" in out


# -- hosts --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec", ["-oProxyCommand=touch /tmp/pwned", "-oProxyCommand=x", "--", "-p", "host;rm", "a b", "user@-evil"]
)
def test_option_like_hosts_are_refused(spec):
    with pytest.raises(BadInput, match="not a host"):
        parse_hosts(spec)


def test_ssh_options_end_before_the_host():
    argv = ssh_argv("me@node-7:2222", ["debug-stuck", "snapshot"], 10, ["IdentityFile=/k"])
    cut = argv.index("--")
    assert argv[cut + 1] == "me@node-7" and "-p" in argv[:cut] and "IdentityFile=/k" in argv[:cut]


def test_the_cli_refuses_an_option_as_a_host(tmp_path, cli):
    marker = tmp_path / "pwned"
    code, _, err = cli("diagnose", f"--hosts=-oProxyCommand=touch {marker}")
    assert code == 2 and "not a host" in err
    code, _, err = cli("diagnose", f"--hosts=node1,-oProxyCommand=touch{marker}")
    assert code == 2 and "not a host" in err
    assert not marker.exists()
