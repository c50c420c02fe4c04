"""gpu-health probe: recorded NVML / amd-smi outputs through debug_stuck.probes.collectors.gpu.RecordedBackend and
recorded kernel logs through a fake dmesg runner (this machine has no GPU: those are the
hardware seams). The real run on this machine must come back `skipped`, fast."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest

from debug_stuck.bounded import CommandResult
from debug_stuck.probes.collectors.gpu.backends import RecordedBackend
from debug_stuck.probes.collectors.gpu.collect import collect_gpus
from debug_stuck.probes.collectors.gpu.model import GpuSnapshot
from debug_stuck.probes.collectors.kernel import KernelLog
from debug_stuck.probes.targeted import gpu_health as gh
from debug_stuck.probes.targeted.base import ProbeContext
from debug_stuck.probes.targeted.registry import probe_spec, run_probe

pytestmark = pytest.mark.timeout(30)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GPU = FIXTURES / "gpu"
PROBES = FIXTURES / "probes"
KERNEL = FIXTURES / "kernel"

# skills/gpu-hardware.md: the probe signal the classifier matches.
PROBE_SIGNAL = re.compile(r"probe=gpu-health status=fail\s*(?P<why>.*)")


class FakeRunner:
    """dmesg/journalctl by argv[0]: a CommandResult, or FileNotFoundError when not listed."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv, timeout):
        self.calls.append(list(argv))
        answer = self.answers.get(argv[0])
        if answer is None:
            raise FileNotFoundError(argv[0])
        return answer


def dmesg(text: str) -> FakeRunner:
    return FakeRunner({"dmesg": CommandResult(argv=[], returncode=0, stdout=text, stderr="", timed_out=False)})


QUIET = dmesg("[Tue Feb 10 19:20:04 2026] EXT4-fs (vda): re-mounted. Opts: (null)\n")


def nvml(name: str, **device_changes) -> RecordedBackend:
    data = json.loads((GPU / name).read_text(encoding="utf-8"))
    for index, changes in device_changes.items():
        data["devices"][int(index.lstrip("d"))].update(changes)
    return RecordedBackend(data)


def by_cause(result, cause):
    return [f for f in result.findings if f.cause == cause]


# ---------------------------------------------------------------------------------------------
# This machine
# ---------------------------------------------------------------------------------------------


def test_real_run_here_is_skipped_fast():
    if gh.driver_present():
        pytest.skip("this machine has a GPU driver")
    started = time.monotonic()
    result = run_probe("gpu-health", ProbeContext(timeout=probe_spec("gpu-health").timeout))
    assert time.monotonic() - started < 3.0
    assert result.status == "skipped"
    assert result.summary.startswith("no GPU on this machine: ")
    assert result.findings == []
    json.dumps(result.to_dict())


# ---------------------------------------------------------------------------------------------
# NVML, recorded
# ---------------------------------------------------------------------------------------------


def test_healthy_a100s_are_ok():
    result = gh.probe(10, backend=nvml("nvml-a100-busy.json"), runner=QUIET, has_driver=True, samples=1)
    assert result.status == "ok", result.findings
    assert result.findings == []
    assert result.summary.startswith("3 nvidia GPU(s) healthy: ECC, remapping")
    assert "kernel log (dmesg)" in result.summary
    assert len(result.data["devices"]) == 3 and result.data["kernel_log"]["source"] == "dmesg"


def test_ecc_errors_pending_remap_and_thermal_throttle():
    result = gh.probe(10, backend=nvml("nvml-a100-ecc-thermal.json"), runner=QUIET, has_driver=True, samples=1)
    assert result.status == "fail"
    messages = [(f.severity, f.message) for f in result.findings]
    assert messages[0][0] == "fail"
    assert messages[0][1].startswith("GPU 0 (NVIDIA A100-SXM4-80GB): 2 uncorrected ECC error(s) since the last")
    assert (
        "warn",
        "GPU 0 (NVIDIA A100-SXM4-80GB): row remapping / page retirement pending (1): reset the GPU or "
        "reboot to apply it",
    ) in messages
    throttled = [m for s, m in messages if "throttled" in m]
    assert throttled == [
        "GPU 0 (NVIDIA A100-SXM4-80GB): clocks throttled at 87 C (hw_slowdown, sw_thermal, hw_thermal): the job "
        "crawls rather than hangs; check cooling and power"
    ]
    assert all(f.cause == "gpu-hardware" for f in result.findings)
    # GPU 1 is healthy: nothing about it
    assert not any("GPU 1" in m for _, m in messages)
    assert result.summary.startswith("GPU 0 (NVIDIA A100-SXM4-80GB): 2 uncorrected ECC")
    facts = result.fact_lines()
    assert PROBE_SIGNAL.search(facts[0])


def test_lifetime_ecc_remap_failure_low_clock_and_pcie_replays():
    backend = nvml(
        "nvml-a100-busy.json",
        d0={"ecc_volatile_uncorrected": 0, "ecc_aggregate_uncorrected": 3, "remapped_rows": [0, 3, 0, 1]},
        d1={"clock_sm": 600, "max_clock_sm": 1410, "clocks_event_reasons": 0, "pcie_replay": 12},
        d2={"pcie_replay": 4097, "temperature": 93, "clocks_event_reasons": 0x4},
    )
    result = gh.probe(10, backend=backend, runner=QUIET, has_driver=True, samples=1)

    def has(severity, prefix):
        return any(f.severity == severity and f.message.startswith(prefix) for f in result.findings)

    a100 = "(NVIDIA A100-SXM4-80GB)"
    assert has("warn", f"GPU 0 {a100}: 3 uncorrected ECC error(s) over its lifetime (none since the last reset)")
    assert has("fail", f"GPU 0 {a100}: row remapping FAILED: the memory cannot repair itself")
    assert has("warn", f"GPU 1 {a100}: clock 600 of 1410 MHz at 100% utilization: slowed with no thermal reason")
    assert has("info", f"GPU 1 {a100}: 12 PCIe replays since boot")
    assert has("warn", f"GPU 2 {a100}: 4097 PCIe replays since boot")
    assert has("warn", f"GPU 2 {a100}: running hot (93 C)")
    assert has("info", f"GPU 2 {a100}: at its power cap (normal under full load)")
    assert result.status == "fail" and result.summary.startswith("GPU 0 (NVIDIA A100-SXM4-80GB): row remapping FAILED")


# ---------------------------------------------------------------------------------------------
# Xid and amdgpu lines, recorded kernel logs
# ---------------------------------------------------------------------------------------------


def test_xid_79_fallen_off_the_bus_is_mapped_to_its_gpu_and_to_cuda_sync():
    # tests/fixtures/kernel/dmesg-T-hangs.txt: Xid 79 on PCI:0000:3b:00 plus amdgpu ring timeout and reset
    backend = nvml("nvml-a100-busy.json", d1={"pci_bus_id": "00000000:3B:00.0"})
    runner = dmesg((KERNEL / "dmesg-T-hangs.txt").read_text(encoding="utf-8"))
    result = gh.probe(10, backend=backend, runner=runner, has_driver=True, samples=1)
    assert result.status == "fail"
    xid = [f for f in result.findings if f.message.startswith("NVRM Xid 79")]
    assert len(xid) == 1 and xid[0].severity == "fail" and xid[0].cause == "gpu-hardware"
    assert xid[0].message.startswith("NVRM Xid 79 on PCI:0000:3b:00 (GPU 1): GPU has fallen off the bus: power, PCIe")
    sync = by_cause(result, "cuda-sync")
    assert [f.severity for f in sync] == ["info"]
    assert "PCI:0000:3b:00 (GPU 1) is gone" in sync[0].message
    amd = [f.message for f in result.findings if f.message.startswith("amdgpu")]
    assert amd[0].startswith("amdgpu: a GPU ring timed out (the GPU stopped responding) (2 lines): [Tue Feb 10")
    assert amd[1].startswith("amdgpu: the GPU was reset, which kills every context on it: ")
    assert result.data["xid"][0]["xid"] == 79 and result.data["xid"][0]["pid"] == "1234"
    # noise in the same log (boot lines, OOM, NFS) is not this probe's business
    assert not any("oom" in line.lower() or "nfs" in line for line in result.data["kernel_lines"])


def test_xid_13_repeats_are_grouped_and_unknown_process_names_dropped():
    # tests/fixtures/probes/dmesg-xid13-109.txt, verbatim from leptonai/gpud#46
    runner = dmesg((PROBES / "dmesg-xid13-109.txt").read_text(encoding="utf-8"))
    result = gh.probe(10, backend=nvml("nvml-a100-busy.json"), runner=runner, has_driver=True, samples=1)
    assert result.status == "warn"
    messages = [f.message for f in result.findings]
    assert messages == [
        "NVRM Xid 13 on PCI:0000:cb:00 x3: graphics engine exception (a kernel faulted, e.g. an out-of-range"
        " access): usually an application bug; hardware only if it repeats across jobs and GPUs",
        "NVRM Xid 109 on PCI:0000:cb:00, process pt_main_thread: context switch timeout (a kernel ran too long or"
        " the GPU stopped responding): if it repeats without a long-running kernel, reset the GPU",
    ]
    assert not PROBE_SIGNAL.search(result.fact_lines()[0])  # warn, not the fail the playbook keys on


@pytest.mark.parametrize(
    "xid,severity,words",
    [
        (13, "warn", "graphics engine exception"),
        (31, "warn", "page fault"),
        (43, "warn", "stopped processing"),
        (48, "fail", "double-bit"),
        (63, "warn", "remapping recorded"),
        (64, "fail", "FAILED"),
        (74, "fail", "NVLink"),
        (79, "fail", "fallen off the bus"),
        (94, "warn", "contained ECC"),
        (95, "fail", "uncontained ECC"),
        (999, "info", "Xid 999"),
    ],
)
def test_xid_decoding(xid, severity, words):
    got_severity, meaning, advice = gh.describe_xid(xid)
    assert got_severity == severity and words in meaning and advice


@pytest.mark.parametrize(
    "line,expected",
    [
        # leptonai/gpud#1174 (kmsg input)
        (
            "NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error",
            (94, "0000:9b:00", "1234", "python3", "Contained ECC error"),
        ),
        # the older format, no pid/name (a display-driver reset published in an issue thread)
        (
            "[ 1399.140323] NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000009 intr 00800000",
            (32, "0000:01:00", None, None, "Channel ID 00000009 intr 00800000"),
        ),
        (
            "kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=0, GPU has fallen off the bus.",
            (79, "0000:01:00", "0", None, "GPU has fallen off the bus."),
        ),
        ("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15", None),
    ],
)
def test_parse_xid_formats(line, expected):
    event = gh.parse_xid(line)
    if expected is None:
        assert event is None
    else:
        assert (event.xid, event.pci, event.pid, event.name, event.detail) == expected


def test_a_gpu_off_the_bus_that_no_tool_can_see_still_fails():
    # NVML finds no device (the GPU is gone), the driver is loaded, the kernel log says why
    absent = RecordedBackend({"vendor": "nvidia", "init_error": "NVML: No supported GPUs", "init_absent": True})
    runner = dmesg("[Tue Feb 10 20:12:36 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n")
    result = gh.probe(10, backend=absent, runner=runner, has_driver=True, samples=1)
    assert result.status == "fail"
    assert result.summary.startswith("NVRM Xid 79 on PCI:0000:3b:00: GPU has fallen off the bus")


def test_no_gpu_and_no_driver_is_skipped_without_reading_the_kernel_log():
    absent = RecordedBackend({"vendor": "nvidia", "init_error": "NVML Shared Library Not Found", "init_absent": True})
    runner = dmesg("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n")
    result = gh.probe(10, backend=absent, runner=runner, has_driver=False, samples=1)
    assert result.status == "skipped" and runner.calls == []
    assert "NVML Shared Library Not Found" in result.summary


def test_lost_gpu_reported_by_nvml_is_a_failure():
    backend = nvml("nvml-a100-busy.json", d2={"temperature": {"error": "GPU is lost"}})
    result = gh.probe(10, backend=backend, runner=QUIET, has_driver=True, samples=1)
    assert result.status == "fail"
    assert result.findings[0].message.startswith(
        "the driver reports the GPU unusable: could not read temperature on GPU 2"
    )


def test_broken_nvml_is_a_warning_with_the_reason():
    broken = RecordedBackend({"vendor": "nvidia", "init_error": "Driver/library version mismatch"})
    result = gh.probe(10, backend=broken, runner=QUIET, has_driver=True, samples=1)
    assert result.status == "warn"
    assert result.summary.startswith("the nvidia driver is loaded but no GPU could be read: could not initialize NVML")


class HangingInit(RecordedBackend):
    def __init__(self, data, release):
        super().__init__(data)
        self.release = release

    def init(self):
        self.release.wait(60)


def test_a_wedged_driver_is_bounded_and_fails():
    release = threading.Event()
    data = json.loads((GPU / "nvml-a100-busy.json").read_text(encoding="utf-8"))
    try:
        started = time.monotonic()
        result = gh.probe(3, backend=HangingInit(data, release), runner=QUIET, has_driver=True, samples=1)
        elapsed = time.monotonic() - started
    finally:
        release.set()
    assert elapsed < 3.0
    assert result.status == "fail"
    assert result.findings[0].message.startswith("the GPU driver does not answer: could not read nvmlInit: no answer")


def test_unreadable_kernel_log_is_a_note_not_a_problem(tmp_path):
    denied = CommandResult(
        argv=[],
        returncode=1,
        stdout="",
        stderr="dmesg: read kernel buffer failed: Operation not permitted\n",
        timed_out=False,
    )
    runner = FakeRunner({"dmesg": denied})
    result = gh.probe(
        10,
        backend=nvml("nvml-a100-busy.json"),
        runner=runner,
        has_driver=True,
        samples=1,
        kern_log=str(tmp_path / "kern.log"),
    )
    assert result.status == "ok"
    assert [f.severity for f in result.findings] == ["info"]
    assert result.findings[0].message.startswith("kernel log not checked: could not read the kernel log: dmesg:")
    assert result.findings[0].cause is None
    assert "kernel log" not in result.summary


def test_check_takes_recorded_inputs_directly():
    gpus = collect_gpus(backend=nvml("nvml-v100-nccl-spin.json"), samples=1)
    log = KernelLog(
        lines=["NVRM: Xid (PCI:0000:00:1e): 48, pid=7, name=python, DBE (double bit error)"], source="dmesg"
    )
    result = gh.check(gpus, log)
    assert result.status == "fail"
    assert result.findings[0].message.startswith("NVRM Xid 48 on PCI:0000:00:1e, process python: double-bit")
    assert json.loads(json.dumps(result.to_dict()))["data"]["xid"][0]["detail"] == "DBE (double bit error)"
    assert gh.check(GpuSnapshot(vendor=None, note="no GPU"), None).status == "skipped"
    # a PCIe AER line (the shape tests/test_kernel.py uses) is a GPU link warning; a DIMM error is not ours
    aer = "pcieport 0000:00:01.1: AER: Uncorrected (Non-Fatal) error received: 0000:01:00.0"
    edac = "EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0"
    result = gh.check(collect_gpus(backend=nvml("nvml-a100-busy.json"), samples=1), KernelLog([aer, edac], "dmesg"))
    assert [(f.severity, f.message) for f in result.findings] == [("warn", f"PCIe AER error(s) on a device: {aer}")]


# ---------------------------------------------------------------------------------------------
# AMD, recorded
# ---------------------------------------------------------------------------------------------


def amd_outputs(**extra):
    outputs = {
        "metric": (GPU / "amd-smi-metric-rx6600.json").read_text(encoding="utf-8"),
        "static": (GPU / "amd-smi-static-rx6600.json").read_text(encoding="utf-8"),
    }
    outputs.update(extra)
    return outputs


def test_amd_smi_healthy_card_and_the_extra_ecc_command():
    # the metric output's own "ecc_blocks": "N/A" (RX 6600, no ECC) read again through the ras key
    backend = RecordedBackend.amd(amd_outputs(ras=amd_outputs()["metric"]))
    result = gh.probe(10, backend=backend, amd_backend=backend, runner=QUIET, has_driver=True, samples=1)
    assert result.status == "ok", result.findings
    assert result.data["amd_ras"] == {"0": {"correctable": 0, "uncorrectable": 0, "deferred": 0, "blocks": {}}}
    assert result.summary.startswith("1 amd GPU(s) healthy")


def test_amd_smi_block_errors_deferred_errors_and_throttling():
    metric = json.loads(amd_outputs()["metric"])
    metric[0]["power"]["throttle_status"] = "THROTTLED"
    ras = (PROBES / "amd-smi-ras-mi300x.json").read_text(encoding="utf-8")
    backend = RecordedBackend.amd(amd_outputs(metric=json.dumps(metric), ras=ras))
    result = gh.probe(10, backend=backend, amd_backend=backend, runner=QUIET, has_driver=True, samples=1)
    assert result.status == "fail"
    messages = [(f.severity, f.message) for f in result.findings]
    assert ("fail", "GPU 0 (Navi 23 [Radeon RX 6600/6600 XT): uncorrectable ECC errors by block: UMC 2") in messages
    assert any(s == "warn" and "1 deferred (poisoned) ECC error(s)" in m for s, m in messages)
    assert any(s == "warn" and "clocks throttled at 37 C (throttled)" in m for s, m in messages)
    assert not any("GPU 1" in m for _, m in messages)
    assert gh.amd_ras_counts(json.loads(ras))[1]["blocks"]["UMC"] == {
        "correctable": 0,
        "uncorrectable": 0,
        "deferred": 0,
    }


def test_amd_ras_command_failure_is_recorded_not_fatal():
    class Failing(RecordedBackend):
        def run(self, key, timeout):
            if key == "ras":
                raise RuntimeError("`amd-smi metric --ecc --ecc-blocks --json` exited with 2: unrecognized arguments")
            return super().run(key, timeout)

    backend = Failing({"vendor": "amd", "outputs": amd_outputs()})
    result = gh.probe(10, backend=backend, amd_backend=backend, runner=QUIET, has_driver=True, samples=1)
    assert result.status == "ok"
    assert result.data["errors"] == [
        "could not read the amd-smi ECC counters: `amd-smi metric --ecc --ecc-blocks --json` exited with 2:"
        " unrecognized arguments"
    ]


def test_rocm_smi_fallback_and_amdgpu_ras_kernel_line():
    backend = RecordedBackend.amd(
        {"metric": (GPU / "rocm-smi-rx7900xtx.json").read_text(encoding="utf-8")}, tool="rocm-smi"
    )
    # the RAS line shape of skills/gpu-hardware.md (amdgpu uncorrectable hardware errors)
    line = "amdgpu 0000:03:00.0: amdgpu: 1 uncorrectable hardware errors detected in umc block\n"
    result = gh.probe(10, backend=backend, runner=dmesg(line), has_driver=True, samples=1)
    assert result.status == "fail"
    assert result.findings[0].message == f"amdgpu RAS (memory/ECC) event: {line.strip()}"
    assert "amd_ras" not in result.data  # rocm-smi has no JSON RAS output: not asked


def test_amd_ras_backend_keeps_the_amd_smi_commands():
    backend = gh.AmdRasBackend()
    assert backend.tool == "amd-smi"
    assert set(backend.commands()) >= {"metric", "static", "process", "bad_pages", "ras"}


def test_in_a_diagnosis_only_the_job_s_own_kernel_lines_count():
    # The judge the pipeline passes (debug_stuck.live.kernel_scope), for a job on GPU 0000:3b:00 that
    # started after boot + 1000 s: the Xid on its GPU counts, the one on another GPU and the earlier
    # one on its GPU are context, said as such and never a cause.
    from debug_stuck.live.kernel_scope import JobScope, judge_line

    scope = JobScope(pids={4242}, started_at=1_000_000.0 + 1000, gpu_busids={"0000:3b:00"})

    def judge(kind, line, boot_time):
        verdict = judge_line(line, kind, scope, 1_000_000.0, now=1_000_000.0 + 5000)
        return verdict.belongs, verdict.why

    ours = "[ 2000.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus."
    other_gpu = "[ 2001.0] NVRM: Xid (PCI:0000:af:00): 48, pid=9999, name=python, DBE (double bit error)"
    before = "[  500.0] NVRM: Xid (PCI:0000:3b:00): 48, pid=77, name=python, DBE (double bit error)"
    gpus = collect_gpus(backend=nvml("nvml-a100-busy.json", d1={"pci_bus_id": "00000000:3B:00.0"}), samples=1)
    log = KernelLog(lines=[before, ours, other_gpu], source="dmesg")
    scoped = gh.check(gpus, log, kernel_judge=judge)
    blamed = [f.message for f in scoped.findings if f.cause == "gpu-hardware"]
    assert len(blamed) == 1 and blamed[0].startswith("NVRM Xid 79 on PCI:0000:3b:00 (GPU 1)"), blamed
    context = [f for f in scoped.findings if f.message.startswith("kernel log, not counted against this job")]
    assert [f.cause for f in context] == [None, None]
    assert "before the job started" in context[0].message and "a GPU the job does not use" in context[1].message
    assert [c["line"] for c in scoped.data["kernel_context"]] == [before, other_gpu]
    # the machine as a whole (`debug-stuck probe gpu-health` with no job): every line counts
    whole = gh.check(gpus, log)
    assert len([f for f in whole.findings if f.cause == "gpu-hardware"]) == 3


def test_given_a_job_s_pids_the_probe_judges_the_kernel_lines_itself(session_job):
    """The session runs probes in a child with the job's PIDs and no judge: the probe builds one
    from them (their processes, start, cgroups, GPUs), so a stray Xid is context there too."""
    import subprocess
    import sys
    import time

    job = session_job([sys.executable, "-c", "import time; time.sleep(120)"], stdout=subprocess.DEVNULL)
    time.sleep(0.2)
    later = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(time.time() + 5))
    ours = f"[{later}] NVRM: Xid (PCI:0000:3b:00): 79, pid={job.pid}, GPU has fallen off the bus."
    other = f"[{later}] NVRM: Xid (PCI:0000:af:00): 48, pid=4194301, name=python, DBE (double bit error)"
    backend = nvml("nvml-a100-busy.json", d1={"pci_bus_id": "00000000:3B:00.0"})
    result = gh.probe(10, backend=backend, runner=dmesg(f"{ours}\n{other}\n"), has_driver=True, samples=1,
                      job_pids=[job.pid])  # fmt: skip
    blamed = [f.message for f in result.findings if f.cause == "gpu-hardware"]
    assert len(blamed) == 1 and blamed[0].startswith("NVRM Xid 79 on PCI:0000:3b:00"), blamed
    assert [c["line"] for c in result.data["kernel_context"]] == [other]
    # the recorded A100s list no compute process: which GPUs the job uses is not known here
    assert result.data["kernel_context"][0]["why"] == "a GPU of this machine; which GPUs the job uses is not known"
