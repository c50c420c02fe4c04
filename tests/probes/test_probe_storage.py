"""storage probe: real directories, a real tiny tmpfs (mounted here as root; skipped when mount is
not permitted), recorded mount tables with network filesystems, a live job with an open file,
and the time bound with the low-level operations made to stall."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from debug_stuck.probes.targeted import storage as cs
from debug_stuck.probes.targeted.base import ProbeContext, TargetNotInspectable
from debug_stuck.probes.targeted.registry import probe_spec, run_probe

pytestmark = pytest.mark.timeout(60)

PROBES = Path(__file__).resolve().parents[1] / "fixtures" / "probes"
NETWORK = (PROBES / "mountinfo-network.txt").read_text(encoding="utf-8")
LUSTRE = (PROBES / "mountinfo-lustre.txt").read_text(encoding="utf-8")


def leftovers(directory: Path):
    return [p.name for p in directory.iterdir() if p.name.startswith(".debug-stuck-")]


# ---------------------------------------------------------------------------------------------
# The mount table
# ---------------------------------------------------------------------------------------------


def test_recorded_mountinfo_network_filesystems():
    mounts = cs.parse_mountinfo(NETWORK + LUSTRE + "no separator here\n")
    assert len(mounts) == 41
    red = cs.mount_for("/home/akutz/red/checkpoints/step_100.pt", mounts)
    assert (red.fstype, red.source, red.point) == ("nfs4", "localhost:/home/akutz", "/home/akutz/red")
    assert "hard" in red.super_options and "timeo=600" in red.super_options
    assert cs.mount_for("/home/akutz/other", mounts).point == "/home"
    assert cs.mount_for("/home/akutz/reddish", mounts).point == "/home"  # a prefix, not a parent
    s3 = cs.mount_for("/var/lib/rexray/volumes/s3fsvol01/shard-0001.tar", mounts)
    assert (s3.fstype, s3.source) == ("fuse.s3fs", "s3fs")
    assert cs.mount_for("/var/lib/rexray/volumes/vol01/x", mounts).fstype == "nfs"
    lustre = cs.mount_for(mounts[-1].point + "/data", mounts)
    assert (lustre.fstype, lustre.source) == ("lustre", "172.18.8.12@tcp:/lustrefs")
    assert cs.mount_for("/tmp/x", mounts).fstype == "xfs"
    assert [m.fstype for m in mounts if cs.is_network_fs(m.fstype)] == ["nfs4", "fuse.s3fs", "nfs", "nfs", "lustre"]


@pytest.mark.parametrize(
    "fstype,network",
    [
        ("nfs4", True),
        ("cifs", True),
        ("smb3", True),
        ("fuse.gcsfuse", True),
        ("fuse.sshfs", True),
        ("beegfs", True),
        ("gpfs", True),
        ("ceph", True),
        ("9p", True),
        ("virtiofs", True),
        ("fuse.lxcfs", False),
        ("fuse.fuse-overlayfs", False),
        ("ext4", False),
        ("overlay", False),
        ("tmpfs", False),
    ],
)
def test_network_filesystem_types(fstype, network):
    assert cs.is_network_fs(fstype) is network


def test_escaped_mount_points_and_stacked_mounts():
    text = (
        "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
        "40 22 0:40 / /mnt/my\\040data rw - nfs4 srv:/x rw,hard\n"
        "41 22 0:41 / /mnt/stack rw - ext4 /dev/sdb1 rw\n"
        "42 22 0:42 / /mnt/stack rw - fuse.gcsfuse bucket rw\n"
    )
    mounts = cs.parse_mountinfo(text)
    assert cs.mount_for("/mnt/my data/f", mounts).fstype == "nfs4"
    assert cs.mount_for("/mnt/stack/f", mounts).fstype == "fuse.gcsfuse"  # the last one mounted wins


def test_path_arguments_of_a_command_line():
    cmdline = [
        "python",
        "train.py",
        "--data=/datasets/imagenet",
        "--out",
        "runs/exp1",
        "--lr",
        "0.1",
        "s3://bucket/key",
        "./cfg.yaml",
        "-v",
    ]
    assert cs._args_paths(cmdline, "/home/u/proj") == [
        "/datasets/imagenet",
        "/home/u/proj/runs/exp1",
        "/home/u/proj/cfg.yaml",
    ]


# ---------------------------------------------------------------------------------------------
# Real directories
# ---------------------------------------------------------------------------------------------


def test_a_healthy_local_directory_is_ok_and_left_clean(tmp_path):
    started = time.monotonic()
    result = cs.probe(30, paths=[str(tmp_path)])
    assert time.monotonic() - started < 5
    assert result.status == "ok", result.findings
    (entry,) = result.data["directories"]
    assert entry["directory"] == str(tmp_path) and entry["fstype"] and not entry["network"]
    m = entry["measure"]
    assert m["read_bytes"] == 1 << 20 and m["removed"] is True
    assert all(m[k] >= 0 for k in ("write_s", "fsync_s", "read_s"))
    assert result.summary.startswith(f"1 directory ok: {tmp_path} (")
    assert leftovers(tmp_path) == []


def test_a_file_path_tests_its_directory_and_a_missing_path_is_a_finding(tmp_path):
    (tmp_path / "model.pt").write_bytes(b"weights")
    result = cs.probe(30, paths=[str(tmp_path / "model.pt"), str(tmp_path / "nope" / "x")])
    assert result.status == "warn"
    assert [f.message for f in result.findings] == [f"{tmp_path}/nope/x does not exist (--path): nothing to test"]
    assert [d["directory"] for d in result.data["directories"]] == [str(tmp_path), str(tmp_path / "nope" / "x")]
    assert (tmp_path / "model.pt").read_bytes() == b"weights"


def test_a_fifo_path_does_not_hang(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = cs.probe(30, paths=[str(fifo)])
    assert time.monotonic() - started < 5
    assert result.status == "ok" and result.data["directories"][0]["directory"] == str(tmp_path)


def test_network_mounts_from_the_job_mount_table_warn_with_the_right_cause(tmp_path):
    ckpt, data, fast = tmp_path / "checkpoints", tmp_path / "data", tmp_path / "lustre"
    for d in (ckpt, data, fast):
        d.mkdir()
    nfs_line = next(line for line in NETWORK.splitlines() if " - nfs4 " in line)
    s3_line = next(line for line in NETWORK.splitlines() if " - fuse.s3fs " in line)
    table = "\n".join(
        [
            "60 1 253:0 / / rw,relatime shared:1 - xfs /dev/mapper/cl-root rw",
            nfs_line.replace("/home/akutz/red", str(ckpt)),
            s3_line.replace("/var/lib/rexray/volumes/s3fsvol01", str(data)),
            LUSTRE.strip().replace(LUSTRE.split()[4], str(fast)),
        ]
    )
    result = cs.probe(30, paths=[str(ckpt), str(data), str(fast)], mountinfo=table)
    assert result.status == "warn"
    got = {(f.cause, f.message.split(" is on ")[0]): f.message for f in result.findings}
    assert got[("checkpoint-save", str(ckpt))] == (
        f"{ckpt} is on nfs4 (localhost:/home/akutz at {ckpt} [hard,timeo=600]): when the server stops answering,"
        " reads and writes there block with no timeout"
    )
    assert got[("io-stall", str(data))].startswith(f"{data} is on fuse.s3fs (s3fs at {data}):")
    assert got[("io-stall", str(fast))].startswith(f"{fast} is on lustre (172.18.8.12@tcp:/lustrefs at {fast}):")
    assert all(d["network"] for d in result.data["directories"])


# ---------------------------------------------------------------------------------------------
# A real tiny tmpfs (root here; skipped when mounting is not permitted)
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path):
    mounted = []

    def mount(name: str, options: str) -> Path:
        where = tmp_path / name
        where.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True, timeout=10
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=10)


def fill(directory: Path) -> None:
    with open(directory / "ballast", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def test_a_small_filesystem_warns_about_checkpoint_space(tmpfs):
    small = tmpfs("small", "size=4m")
    result = cs.probe(30, paths=[str(small)])
    assert result.status == "warn"
    (finding,) = result.findings
    assert finding.cause == "checkpoint-save"
    assert finding.message.startswith(f"{small}: only 4.2 MB free of 4.2 MB (100.0%): a checkpoint save can run out")
    assert result.data["directories"][0]["fstype"] == "tmpfs"
    assert leftovers(small) == []


def test_a_full_filesystem_fails(tmpfs):
    full = tmpfs("full", "size=1m")
    fill(full)
    result = cs.probe(30, paths=[str(full)])
    assert result.status == "fail"
    messages = [(f.severity, f.cause, f.message) for f in result.findings]
    assert ("fail", "checkpoint-save", f"{full}: the filesystem is full (0 of 1.0 MB free)") in messages
    assert any(s == "fail" and m.startswith(f"{full}: writing 1 MiB failed: no space left") for s, _, m in messages)
    assert leftovers(full) == []


def test_a_read_only_filesystem_is_information_not_an_error(tmpfs):
    ro = tmpfs("ro", "ro,size=1m")
    result = cs.probe(30, paths=[str(ro)])
    assert [(f.severity, f.cause) for f in result.findings if "read-only" in f.message] == [("info", None)]
    assert not any(f.severity == "fail" for f in result.findings)


# ---------------------------------------------------------------------------------------------
# The bound: low-level operations made to stall
# ---------------------------------------------------------------------------------------------


def test_a_stalled_fsync_is_killed_at_the_limit_and_the_temp_file_removed(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    started = time.monotonic()
    result = cs.probe(5, paths=[str(data)], prelude="import os, time\nos.fsync = lambda fd: time.sleep(60)")
    elapsed = time.monotonic() - started
    limit = result.data["limit_s"]
    assert limit < 3 and elapsed < limit + 2.5
    assert result.status == "fail"
    (finding,) = result.findings
    assert finding.cause == "io-stall"
    assert (
        finding.message
        == f"{data}: fsync (flushing to storage) did not finish within {limit:g} s: I/O there is stalled"
    )
    assert result.data["directories"][0]["measure"]["removed"] is True
    assert leftovers(data) == []


def test_a_stalled_statvfs_is_an_io_stall(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    result = cs.probe(5, paths=[str(ckpt)], prelude="import os, time\nos.statvfs = lambda p: time.sleep(60)")
    assert result.status == "fail"
    (finding,) = result.findings
    assert finding.cause == "io-stall"  # statvfs hangs on the mount itself, whatever the directory holds
    assert finding.message.startswith(f"{ckpt}: statvfs (free space query) did not finish within")


def test_a_path_lookup_that_never_returns_is_bounded(tmp_path, monkeypatch):
    release = threading.Event()
    real = cs._stat_kind

    def stat_kind(path):
        if path.endswith("dead-mount"):
            release.wait(30)
        return real(path)

    monkeypatch.setattr(cs, "_stat_kind", stat_kind)
    try:
        started = time.monotonic()
        result = cs.probe(10, paths=[str(tmp_path / "dead-mount"), str(tmp_path)])
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert elapsed < 4
    assert result.status == "fail"
    assert result.findings[0].message == (
        f"{tmp_path}/dead-mount: looking the path up did not return within 1.5 s: the filesystem does not answer"
    )
    assert result.data["directories"][1]["measure"]["stage"] == "done"  # the healthy one was still measured


# ---------------------------------------------------------------------------------------------
# A live job
# ---------------------------------------------------------------------------------------------

JOB = """
import sys, time
fh = open(sys.argv[1], "w")
fh.write("step 1")
fh.flush()
print("ready", flush=True)
time.sleep(60)
"""


@pytest.fixture
def job(tmp_path, session_job):
    work, ckpt, data = tmp_path / "work", tmp_path / "out" / "checkpoints", tmp_path / "datasets" / "shards"
    for d in (work, ckpt, data):
        d.mkdir(parents=True)
    argv = [sys.executable, "-c", JOB, str(ckpt / "last.pt"), f"--data={data}", "--lr", "0.1", "./missing/x"]
    proc = session_job(argv, cwd=work, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc, work, ckpt, data


def test_live_job_directories_from_cwd_open_files_and_arguments(job):
    proc, work, ckpt, data = job
    result = cs.probe(30, pids=[proc.pid])
    dirs = {d["directory"]: d for d in result.data["directories"]}
    assert set(dirs) == {str(work), str(ckpt), str(data)}
    assert dirs[str(work)]["origins"] == [f"cwd of {proc.pid}"]
    assert dirs[str(ckpt)]["origins"] == [f"open file of {proc.pid}", f"argument of {proc.pid}"]
    assert dirs[str(ckpt)]["checkpoint"] is True and dirs[str(work)]["checkpoint"] is False
    assert dirs[str(data)]["origins"] == [f"argument of {proc.pid}"]
    assert result.status == "ok", result.findings
    assert (ckpt / "last.pt").read_text() == "step 1"  # the job's own file is never touched
    assert proc.poll() is None


def test_a_pid_that_does_not_exist_cannot_be_inspected():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=10)
    with pytest.raises(TargetNotInspectable) as raised:  # exit 3, not a SKIPPED result (issue 15)
        cs.probe(10, pids=[proc.pid])
    assert raised.value.message == f"process {proc.pid} does not exist (it may have exited)"


def test_through_the_framework(tmp_path):
    result = run_probe("storage", ProbeContext(timeout=probe_spec("storage").timeout, paths=[str(tmp_path)]))
    assert result.status == "ok" and result.seconds < 5
    assert result.to_dict()["data"]["directories"][0]["measure"]["removed"] is True
