"""Kernel log collector: the lines that matter for hangs, and a read that is always bounded.

Recorded outputs go through a fake runner (the seam); the real dmesg/journalctl run once, on
this machine, and must return within the bound whatever the permissions are.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from debug_stuck.bounded import CommandResult
from debug_stuck.probes.collectors.kernel import KernelLog, classify, interesting, interesting_tagged, read_kernel_log

pytestmark = pytest.mark.timeout(30)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel"
DMESG_T = (FIXTURES / "dmesg-T-hangs.txt").read_text(encoding="utf-8")

EXPECTED = [
    "[Tue Feb 10 19:34:57 2026] workqueue: amdgpu_amdkfd_restore_userptr_worker [amdgpu] hogged CPU for >10000us"
    " 4 times, consider switching to WQ_UNBOUND",
    "[Tue Feb 10 19:58:22 2026] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx timeout, signaled seq=224260,"
    " emitted seq=224262",
    "[Tue Feb 10 19:58:22 2026] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* Process information: process Xorg pid 1037"
    " thread Xorg:cs0 pid 1046",
    "[Tue Feb 10 19:58:22 2026] amdgpu 0000:1d:00.0: GPU reset begin!",
    "[Tue Feb 10 20:12:36 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
    "[Tue Feb 10 20:30:11 2026] sunloginclient invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0,"
    " oom_score_adj=0",
    "[Tue Feb 10 20:30:11 2026] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
    "task_memcg=/user.slice/user-1000.slice/user@1000.service,task=python,pid=698405,uid=1000",
    "[Tue Feb 10 20:30:11 2026] Out of memory: Killed process 698405 (python) total-vm:49978204kB,"
    " anon-rss:12918388kB, file-rss:68668kB, shmem-rss:53352kB, UID:1000 pgtables:49772kB oom_score_adj:0",
    "[Tue Feb 10 20:41:03 2026] nfs: server ease not responding, still trying",
    "[Tue Feb 10 20:41:04 2026] nfs: server ease not responding, still trying",
    "[Tue Feb 10 20:44:38 2026] INFO: task objcopy:24916 blocked for more than 120 seconds.",
]


def test_interesting_keeps_exactly_the_hang_lines():
    assert interesting(DMESG_T.splitlines()) == EXPECTED


def test_interesting_lines_are_tagged_by_kind():
    kinds = [kind for kind, _line in interesting_tagged(DMESG_T.splitlines())]
    assert kinds == [
        "workqueue-hog",
        "amdgpu-timeout",
        "amdgpu-timeout",
        "amdgpu-reset",
        "nvidia-xid",
        "oom",
        "oom",
        "oom",
        "nfs",
        "nfs",
        "hung-task",
    ]


@pytest.mark.parametrize(
    "line, kind",
    [
        # real lines (ROCm/legacy-rocm-build#5997, NVIDIA/NVSentinel#155, ROCm/legacy-rocm-build#4515)
        (
            "amdgpu 0000:0c:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=1036139, emitted seq=1036141",
            "amdgpu-timeout",
        ),
        ("amdgpu 0000:0c:00.0: amdgpu: Starting gfx_0.0.0 ring reset", "amdgpu-reset"),
        ("amdgpu 0000:0c:00.0: [drm] device wedged, but recovered through reset", "amdgpu-reset"),
        ("               NVRM: fallen off the bus and is not responding to commands.", "nvidia-bus"),
        ("amdgpu 0000:c5:00.0: amdgpu: MES failed to respond to msg=REMOVE_QUEUE", "amdgpu-error"),
        ("workqueue: svm_range_restore_work [amdgpu] hogged CPU for >10000us 67 times", "workqueue-hog"),
        # kernel message formats
        ("amdgpu 0000:c1:00.0: amdgpu: 2 uncorrectable hardware errors detected in UMC block", "amdgpu-ras"),
        ("Memory cgroup out of memory: Killed process 629 (onmt_train) total-vm:14119556kB", "oom"),
        ("watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [python:4242]", "lockup"),
        ("rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", "lockup"),
        ("python3[4242]: segfault at 0 ip 00007f0c2b1e4a2d sp 00007ffd3c9e8a40 error 4 in libc.so.6", "crash"),
        ("traps: pt_main_thread[4242] general protection fault ip:7f0c2b1e4a2d sp:7ffd3c9e8a40 error:0", "crash"),
        ("Bus error (core dumped)", "bus-error"),
        ("mlx5_core 0000:c1:00.0 ibp193s0: Link down", "network"),
        ("NETDEV WATCHDOG: eth0 (mlx5_core): transmit queue 3 timed out", "network"),
        ("ice 0000:17:00.0 ens1f0: NIC Link is Down", "network"),
        ("mce: [Hardware Error]: Machine check events logged", "hardware-error"),
        ("EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0", "hardware-error"),
        ("pcieport 0000:00:01.1: AER: Uncorrected (Non-Fatal) error received: 0000:01:00.0", "hardware-error"),
        ("lockd: server 10.0.0.5 not responding, still trying", "nfs"),
    ],
)
def test_patterns_for_each_kind(line, kind):
    assert classify(line) == kind


@pytest.mark.parametrize(
    "line",
    [
        "amdgpu 0000:75:00.0: amdgpu: RAS: optional ras ta ucode is not available",
        "nfs: server ease OK",
        '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
        "oom_reaper: reaped process 698405 (python), now anon-rss:0kB, file-rss:68664kB, shmem-rss:53172kB",
        "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE",
        "workqueue: ib_cache_event_task [ib_core] hogged CPU for >10000us 4 times, consider switching to WQ_UNBOUND",
        "ata1: SATA link down (SStatus 0 SControl 300)",
        "EDAC MC: Ver: 3.0.0",
        "EDAC amd64: Node 0: DRAM ECC enabled.",
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
        "amdgpu 0000:75:00.0: amdgpu: SMU is initialized successfully!",
    ],
)
def test_boot_noise_is_not_interesting(line):
    assert classify(line) is None


# ---------------------------------------------------------------------------------------------
# read_kernel_log through a fake runner
# ---------------------------------------------------------------------------------------------


class FakeRunner:
    """Answers by argv; records the calls. A callable answer is called with the timeout."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv, timeout):
        self.calls.append(list(argv))
        answer = self.answers.get(tuple(argv[:2]), self.answers.get(argv[0]))
        if answer is None:
            raise FileNotFoundError(argv[0])
        if callable(answer):
            return answer(argv, timeout)
        return answer


def ok(stdout, stderr=""):
    return CommandResult(argv=[], returncode=0, stdout=stdout, stderr=stderr, timed_out=False)


def failed(stderr, rc=1):
    return CommandResult(argv=[], returncode=rc, stdout="", stderr=stderr, timed_out=False)


DENIED = failed("dmesg: read kernel buffer failed: Operation not permitted\n")
JOURNAL_DENIED = ok(
    "-- No entries --\n",
    "Hint: You are currently not seeing messages from other users and the system.\n"
    "      Users in groups 'adm', 'systemd-journal' can see all messages.\n"
    "      Pass -q to turn off this notice.\n",
)
JOURNAL_K = (
    "Feb 27 16:50:31.012345 x kernel: amdgpu 0000:0c:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=1036139,"
    " emitted seq=1036141\n"
    "Feb 27 16:50:31.013001 x kernel: amdgpu 0000:0c:00.0: amdgpu: Starting gfx_0.0.0 ring reset\n"
)


def test_dmesg_T_is_read_and_tailed():
    runner = FakeRunner({("dmesg", "-T"): ok(DMESG_T)})
    log = read_kernel_log(runner=runner)
    assert log.source == "dmesg" and log.error is None and log.ok
    assert log.lines == DMESG_T.splitlines()
    assert runner.calls == [["dmesg", "-T"]]
    assert log.interesting() == EXPECTED
    tail = read_kernel_log(max_lines=3, runner=runner)
    assert tail.lines == DMESG_T.splitlines()[-3:]


def test_dmesg_without_T_falls_back_to_plain_dmesg():
    busybox = failed("dmesg: invalid option -- 'T'\nBusyBox v1.36.1 multi-call binary.\n\nUsage: dmesg [-cr]\n")
    plain = "[  812.123456] nfs: server ease not responding, still trying\n"
    runner = FakeRunner({("dmesg", "-T"): busybox, "dmesg": ok(plain)})
    log = read_kernel_log(runner=runner)
    assert runner.calls == [["dmesg", "-T"], ["dmesg"]]
    assert log.source == "dmesg" and log.lines == [plain.strip()]


def test_dmesg_not_permitted_falls_through_to_journalctl():
    runner = FakeRunner({"dmesg": DENIED, "journalctl": ok("-- Logs begin at Mon 2026-02-23 --\n" + JOURNAL_K)})
    log = read_kernel_log(max_lines=500, runner=runner)
    assert runner.calls == [
        ["dmesg", "-T"],
        ["journalctl", "-k", "-n", "500", "--no-pager", "-o", "short-precise"],
    ]
    assert log.source == "journalctl" and log.error is None
    assert log.lines == JOURNAL_K.splitlines()
    assert log.notes == [
        "dmesg: read kernel buffer failed: Operation not permitted (run as root or set kernel.dmesg_restrict=0)"
    ]
    assert [kind for kind, _ in interesting_tagged(log.lines)] == ["amdgpu-timeout", "amdgpu-reset"]


def test_nothing_permitted_is_a_clear_error(tmp_path):
    runner = FakeRunner({"dmesg": DENIED, "journalctl": JOURNAL_DENIED})
    log = read_kernel_log(runner=runner, kern_log=str(tmp_path / "kern.log"))
    assert log.lines == [] and log.source is None and not log.ok
    assert log.error == (
        "could not read the kernel log: dmesg: read kernel buffer failed: Operation not permitted"
        " (run as root or set kernel.dmesg_restrict=0); journalctl: no kernel messages visible"
        f" (run as root or add the user to the adm or systemd-journal group); {tmp_path / 'kern.log'}: not found"
    )
    assert json.loads(json.dumps(log.to_dict()))["error"] == log.error


def test_kern_log_tail_when_no_tool_works(tmp_path):
    kern = tmp_path / "kern.log"
    body = "".join(f"Feb 10 20:00:{i % 60:02d} host kernel: line {i}\n" for i in range(5000))
    kern.write_text(body + "Feb 10 20:41:03 host kernel: nfs: server ease not responding, still trying\n")
    runner = FakeRunner({})  # neither dmesg nor journalctl installed
    log = read_kernel_log(max_lines=10, runner=runner, kern_log=str(kern))
    assert log.source == str(kern)
    assert len(log.lines) == 10 and log.lines[-1].endswith("nfs: server ease not responding, still trying")
    assert log.lines[0] == "Feb 10 20:00:11 host kernel: line 4991"
    assert log.notes == ["dmesg: not installed", "journalctl: not installed"]


def test_a_runner_that_times_out_is_bounded_and_reported(tmp_path):
    def slow(argv, timeout):
        time.sleep(min(timeout, 10))
        return CommandResult(argv=argv, returncode=None, stdout="", stderr="", timed_out=True)

    runner = FakeRunner({"dmesg": slow, "journalctl": slow})
    started = time.monotonic()
    log = read_kernel_log(timeout=1.0, runner=runner, kern_log=str(tmp_path / "kern.log"))
    elapsed = time.monotonic() - started
    assert elapsed < 2.0
    assert log.source is None
    assert log.error.startswith("could not read the kernel log: dmesg: did not finish within 1 s")
    assert "journalctl: not tried, the 1 s budget was spent" in log.error


def test_a_runner_that_never_returns_is_still_bounded(tmp_path):
    release = threading.Event()

    def stuck(argv, timeout):
        release.wait(60)  # ignores its timeout, like a buggy runner
        return ok("")

    runner = FakeRunner({"dmesg": stuck})
    try:
        started = time.monotonic()
        log = read_kernel_log(timeout=1.0, runner=runner, kern_log=str(tmp_path / "kern.log"))
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert elapsed < 1.0 + 1.5
    assert log.source is None and "dmesg: did not finish within 1 s" in log.error


def test_kernel_log_to_dict():
    log = KernelLog(lines=EXPECTED[:1] + ["noise"], source="dmesg")
    data = log.to_dict()
    assert data["interesting"] == EXPECTED[:1]
    assert data["source"] == "dmesg" and data["error"] is None and data["notes"] == []


# ---------------------------------------------------------------------------------------------
# The real thing, on this machine
# ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(15)
def test_real_kernel_log_returns_within_the_bound():
    started = time.monotonic()
    log = read_kernel_log(max_lines=200, timeout=3.0)
    elapsed = time.monotonic() - started
    assert elapsed < 5.0
    assert isinstance(log, KernelLog)
    assert (log.source is not None) != (log.error is not None)
    if log.source is not None:
        assert len(log.lines) <= 200
    else:
        assert log.error.startswith("could not read the kernel log: ")
    json.dumps(log.to_dict())
