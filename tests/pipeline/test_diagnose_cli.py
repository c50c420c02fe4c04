import json

import pytest

from conftest import REPO, run_subprocess

SCHEMA = json.loads((REPO / "docs" / "report.schema.json").read_text())


def validate(report):
    import jsonschema

    jsonschema.validate(report, SCHEMA)
    if report["verdict"]["cause"] is not None:
        assert report["verdict"]["cause"] == report["diagnoses"][0]["cause"]
    confidences = [d["confidence"] for d in report["diagnoses"]]
    assert confidences == sorted(confidences, reverse=True)


def test_answers_only_report_matches_the_schema(cli_json):
    report = cli_json(
        "--answer", "phase=mid-run", "--answer", "gpu=idle", "--answer", "step=random", "--answer", "cpu=busy"
    )
    validate(report)
    assert report["pattern"] == "B"
    assert report["answers"]["phase"] == {"value": "mid-run", "source": "user"}
    assert report["verdict"]["cause"] == "gc-pause"
    assert report["verdict"]["hung"] is None  # nothing observed, only reported
    top = report["diagnoses"][0]
    assert top["playbook"] == "skills/gc-pause.md"
    assert top["fixes"] and top["fixes"][0]["commands"]


def test_no_answers_gives_no_pattern_and_asks(cli_json):
    report = cli_json()
    validate(report)
    assert report["pattern"] is None
    keys = [q["key"] for q in report["next_questions"]]
    assert "phase" in keys


def test_answers_file_yaml_and_json_and_flag_override(tmp_path, cli_json):
    yml = tmp_path / "a.yaml"
    yml.write_text("phase: start\nstuck_at: process-group\n")
    report = cli_json("--answers", yml)
    assert report["pattern"] == "A"
    assert report["verdict"]["cause"] == "nccl-init"
    js = tmp_path / "a.json"
    js.write_text(json.dumps({"phase": {"value": "mid-run"}, "step": "same-step"}))
    report = cli_json("--answers", js, "--answer", "step=random", "--answer", "gpu=busy")
    assert report["answers"]["step"]["value"] == "random"
    assert report["pattern"] == "C"


def test_previous_report_is_accepted_as_answers_file(tmp_path, cli_json):
    first = cli_json("--answer", "phase=start", "--answer", "platform=rocm")
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(first))
    again = cli_json("--answers", saved)
    assert again["answers"]["platform"]["value"] == "rocm"


@pytest.mark.parametrize(
    "args, words",
    [
        (["--answer", "colour=blue"], ["unknown answer key 'colour'", "phase", "gpu", "step"]),
        (["--answer", "phase=sometimes"], ["bad value 'sometimes' for answer 'phase'", "start", "mid-run", "unknown"]),
        (["--answer", "phase"], ["not KEY=VALUE"]),
        (["--answer", "nodes=-3"], ["positive integer"]),
        (["--answers", "/nonexistent/answers.yaml"], ["does not exist"]),
        (["--example", "no-such-example"], ["no bundled example", "valid:"]),
        (["--log-bytes", "10"], ["too small"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, words):
    proc = run_subprocess("diagnose", *args)
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0]
    assert proc.stdout == ""


@pytest.mark.parametrize(
    "content, word",
    [
        ("phase: [start\n", "malformed"),
        ("- phase\n- start\n", "mapping"),
        ("phase:\n  nested: true\n", "single value"),
        (b"\x00\x01\x02binary", "binary"),
    ],
)
def test_malformed_answers_file(tmp_path, content, word):
    path = tmp_path / "answers.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    proc = run_subprocess("diagnose", "--answers", path)
    assert proc.returncode == 2
    assert word in proc.stderr and "Traceback" not in proc.stderr


def test_missing_and_binary_logs_give_a_report_with_errors(tmp_path, cli_json):
    binary = tmp_path / "model.pt"
    binary.write_bytes(bytes(range(256)) * 400)
    report = cli_json("--answer", "phase=start", "--log", tmp_path / "missing.log", "--log", binary)
    validate(report)
    assert len(report["errors"]) == 2
    assert "missing.log" in report["errors"][0] and "binary" in report["errors"][1]
    assert report["pattern"] == "A"


def test_huge_sparse_log(tmp_path, cli_json):
    path = tmp_path / "train.log"
    with open(path, "wb") as fh:
        fh.truncate(2 * 1024**3)
        fh.seek(0, 2)
        fh.write(b"step 41 loss 2.0\nRuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly\n")
    report = cli_json("--log", path)
    validate(report)
    assert report["verdict"]["cause"] == "dataloader"
    assert report["answers"]["phase"]["source"] == "log"


def test_output_file_and_formats(tmp_path, cli):
    out = tmp_path / "r.md"
    code, stdout, err = cli(
        "diagnose",
        "--answer",
        "phase=start",
        "--answer",
        "platform=rocm",
        "--answer",
        "stuck_at=first-step",
        "--format",
        "markdown",
        "--output",
        out,
    )
    assert code == 0 and stdout == ""
    text = out.read_text()
    assert text.startswith("# Hang report")
    assert "## Diagnosis:" in text and "### Fix" in text and "### Next command" in text
    assert "miopen" in text.lower()
    code, stdout, _ = cli(
        "diagnose", "--answer", "phase=start", "--answer", "platform=rocm", "--answer", "stuck_at=first-step"
    )
    assert code == 0 and "Cause: miopen-find" in stdout and "Fix:" in stdout


def test_output_to_unwritable_path_is_exit_2(tmp_path):
    proc = run_subprocess("diagnose", "--output", tmp_path / "no" / "such" / "dir" / "r.json")
    assert proc.returncode == 2 and "cannot write" in proc.stderr


def test_never_prompts_without_a_tty(tmp_path):
    # stdin closed: a prompt would fail or hang; diagnose must just report.
    proc = run_subprocess("diagnose", "--no-input", "--format", "json", timeout=30)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["schema_version"] == "1"


def test_nccl_watchdog_details_are_extracted(tmp_path, cli_json):
    log = tmp_path / "rank0.log"
    log.write_text(
        "step 1200 loss 2.1\n"
        "[rank0]:[E1115 02:51:12.123456 1234 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=4711, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
        "Timeout(ms)=600000) ran for 600023 milliseconds before timing out.\n"
    )
    report = cli_json("--log", log)
    assert report["verdict"]["cause"] == "collective"
    details = " ".join(e["detail"] for e in report["diagnoses"][0]["evidence"])
    assert "4711" in details and "ALLREDUCE" in details
    assert report["answers"]["phase"] == {
        "value": "mid-run",
        "source": "log",
        "why": "rank0.log shows step 1200 in this run",
    }


def test_two_logs_stopping_at_the_same_step_mean_same_step(tmp_path, cli_json):
    for n in (1, 2):
        (tmp_path / f"run{n}.log").write_text("".join(f"step {i} loss 1.0\n" for i in range(0, 4201, 100)))
    report = cli_json("--log", tmp_path / "run1.log", "--log", tmp_path / "run2.log")
    assert report["answers"]["step"]["value"] == "same-step"
    assert report["pattern"] == "D"


def test_stale_log_marks_hung(tmp_path, cli_json):
    import os
    import time

    log = tmp_path / "train.log"
    log.write_text("".join(f"step {i} loss 1.0\n" for i in range(50)))
    old = time.time() - 3600
    os.utime(log, (old, old))
    report = cli_json("--log", log, "--answer", "gpu=idle")
    assert report["verdict"]["hung"] is True
    assert "has not changed for" in report["verdict"]["summary"]
    fresh = tmp_path / "fresh.log"
    fresh.write_text("step 1 loss 1.0\n")
    assert cli_json("--log", fresh)["verdict"]["hung"] is None


def test_list_examples(cli):
    code, out, _ = cli("diagnose", "--list-examples")
    assert code == 0
    assert "miopen-first-batch" in out


@pytest.mark.parametrize(
    "scenario, cause",
    [("cuda_sync", "cuda-sync"), ("dataloader", "dataloader"), ("nccl_fr", "cuda-sync")],
)
def test_reports_of_real_hung_gpu_jobs_match_the_schema(scenario, cause):
    # `diagnose --pid P --format json` of bench/gpu_check.py's jobs on an H200 (tests/fixtures/gpu/README.md)
    report = json.loads((REPO / "tests" / "fixtures" / "gpu" / "h200" / f"{scenario}-report.json").read_text())
    validate(report)
    assert report["verdict"]["hung"] is True and report["verdict"]["cause"] == cause
    assert [g["name"] for g in report["gpus"]] == ["NVIDIA H200"]
    # the job wrote its dump in both forms at one prefix: the pickle is used, and the report says so
    assert [e for e in report["errors"] if "two dumps, used" not in e] == []
    if scenario == "nccl_fr":  # found from the job's TORCH_FR_DUMP_TEMP_FILE, read through /proc/P/root
        assert report["flight_recorder"]["seq"] == 5 and report["flight_recorder"]["collective"] == "nccl:all_reduce"
        assert all(s.startswith("/proc/") for s in report["flight_recorder"]["sources"])


@pytest.mark.parametrize("scenario", ["healthy_gpu", "quiet_gpu"])
def test_reports_of_real_healthy_gpu_training_say_progressing(scenario):
    # `diagnose --pid P --format json` of bench/gpu_check.py's training loops on an H100
    # (tests/fixtures/gpu/README.md): one logs every 50 steps, the other nothing after its first line
    report = json.loads((REPO / "tests" / "fixtures" / "gpu" / "h100" / f"{scenario}-report.json").read_text())
    validate(report)
    assert report["verdict"]["hung"] is False and report["verdict"]["state"] == "progressing"
    assert report["verdict"]["cause"] is None and report["culprit"] is None
    if scenario == "quiet_gpu":  # its log is silent: the GPU's own work tells
        assert "GPU 0 computes for the job: 100% busy at 656 W of 700 W" in report["verdict"]["summary"]


def test_report_of_a_rank_evaluating_on_its_gpu_while_the_other_waits_says_progressing():
    # torchrun, two gloo ranks on an H100: rank 0 evaluates on the GPU with a silent log (one line of
    # its own code, waiting in .item()), rank 1 waits in dist.barrier(); before the fix, a hung cpu-spin
    report = json.loads((REPO / "tests" / "fixtures" / "gpu" / "h100" / "eval_while_waiting-report.json").read_text())
    validate(report)
    assert report["verdict"]["hung"] is False and report["verdict"]["state"] == "progressing"
    assert report["culprit"] is None and report["verdict"]["cause"] is None
    summary = report["verdict"]["summary"]
    assert "pid 528 (rank 0) computes on GPU 0 (98% busy at 697 W of 700 W) while pid 529 (rank 1) waits" in summary
    assert "backend" not in report["job"]["context"]  # gloo, in a container whose image sets NCCL_VERSION


def test_report_of_an_nccl_rank_waiting_for_a_rank_that_never_reached_its_first_collective():
    # torchrun, two NCCL ranks on an H100: rank 1 blocks opening a FIFO before its first collective;
    # rank 0 waits in all_reduce, inside NCCL's bootstrap (bootstrapInit, accept)
    report = json.loads((REPO / "tests" / "fixtures" / "gpu" / "h100" / "nccl_late_rank-report.json").read_text())
    validate(report)
    assert report["verdict"]["hung"] is True and report["verdict"]["cause"] == "io-stall"
    assert report["culprit"]["pid"] == 746 and report["culprit"]["rank"] == 1
    assert report["chain"][-1]["pid"] == 746 and report["chain"][-1]["waits_on"]["kind"] == "fifo"
    assert report["job"]["context"]["backend"] == "nccl"
    assert report["diagnoses"][0]["fixes"][0]["title"].startswith("Nothing will ever write ")


def test_report_of_pinned_dataloader_workers_that_never_deliver_names_the_worker():
    # pin_memory=True on an H100: the main thread waits on the pin-memory thread's queue.Queue, that
    # thread on the workers' multiprocessing queue; the chain goes through to the worker
    report = json.loads((REPO / "tests" / "fixtures" / "gpu" / "h100" / "dataloader_pinned-report.json").read_text())
    validate(report)
    assert report["verdict"]["hung"] is True and report["verdict"]["cause"] == "dataloader"
    assert report["culprit"]["pid"] == 531 and report["culprit"]["role"] == "dataloader-worker"
    assert [hop["pid"] for hop in report["chain"]] == [527, 531]


@pytest.mark.parametrize("scenario", ["lightning_val", "hf_eval"])
def test_reports_of_real_framework_evaluations_on_a_gpu_say_progressing_in_validation(scenario):
    # a Lightning Trainer's validation loop and the HF Trainer's evaluate() (bf16, BERT-large-sized,
    # two DataLoader workers), each with a silent log, on an H200 (tests/fixtures/gpu/README.md)
    report = json.loads((REPO / "tests" / "fixtures" / "gpu" / "h200" / f"{scenario}-report.json").read_text())
    validate(report)
    assert report["verdict"]["hung"] is False and report["verdict"]["state"] == "progressing"
    assert report["verdict"]["phase"] == "validation" and report["culprit"] is None
    assert "GPU 0 computes for the job" in report["verdict"]["summary"]


def test_report_of_a_gpu_job_fed_by_workers_that_all_compute_is_not_called_hung():
    # an H100 idle beside a model whose two DataLoader workers spend 30 s of CPU on each sample: the
    # main thread waits for a batch, the log is silent; one window cannot tell slow from stuck
    report = json.loads((REPO / "tests" / "fixtures" / "gpu" / "h100" / "input_bound-report.json").read_text())
    validate(report)
    assert report["verdict"]["hung"] is None and report["verdict"]["state"] is None
    said = report["verdict"]["summary"]
    assert "Not judged hung from this window: pid 549 (rank) waits for a batch while all 2 of its DataLoader" in said
    assert "py-spy dump --locals --pid 552" in said


def test_report_of_a_rank_saving_while_the_other_waits_in_a_barrier_says_progressing():
    # torchrun, two gloo ranks: rank 0 writes 2 GiB of GPU tensors with torch.save again and again
    report = json.loads((REPO / "tests" / "fixtures" / "gpu" / "h100" / "save_while_waiting-report.json").read_text())
    validate(report)
    assert report["verdict"]["hung"] is False and report["verdict"]["state"] == "progressing"
    assert "pid 755 (rank 0) computes in a checkpoint pass while pid 756 (rank 1) waits" in report["verdict"]["summary"]


def test_report_of_a_stopped_rank_names_it_with_how_to_resume_it():
    # torchrun, two gloo ranks with CUDA tensors: rank 1 stopped itself (SIGSTOP), rank 0 in all_reduce
    report = json.loads((REPO / "tests" / "fixtures" / "gpu" / "h100" / "stopped_rank-report.json").read_text())
    validate(report)
    assert report["verdict"]["hung"] is True and report["verdict"]["cause"] == "collective"
    assert report["culprit"]["pid"] == 979 and report["culprit"]["rank"] == 1 and report["culprit"]["state"] == "T"
    assert (
        report["diagnoses"][0]["fixes"][0]["title"]
        == "Resume rank 1 (pid 979): it is stopped, and rank 0 (pid 978) waits for it"
    )


def test_report_of_a_live_jax_process_at_the_rendezvous():
    # process 0 of two in jax.distributed.initialize(), process 1 never started (H100 machine, JAX on CPU)
    report = json.loads((REPO / "tests" / "fixtures" / "gpu" / "h100" / "jax_init-report.json").read_text())
    validate(report)
    assert report["verdict"]["hung"] is True and report["verdict"]["cause"] == "rendezvous"
    assert report["job"]["context"]["stack"] == "jax"  # its frames are jax's; its script imports torch too
    top = report["diagnoses"][0]
    assert all("jax" in (fix.get("applies") or {}).get("stack", ["jax"]) for fix in top["fixes"])
    assert "for torch; this job: jax" in [left["why"] for left in top["fixes_left_out"]]
