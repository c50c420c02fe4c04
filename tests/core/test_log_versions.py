"""Log lines across versions and frameworks: the same fact, however it was printed (issue 13)."""

from __future__ import annotations

from pathlib import Path

import yaml

CASES = Path(__file__).parents[1] / "fixtures" / "field" / "cases"


def evidence_of(report: dict, cause: str) -> str:
    for diagnosis in report["diagnoses"]:
        if diagnosis["cause"] == cause:
            return " | ".join(e["detail"] for e in diagnosis["evidence"])
    return ""


def test_the_pytorch_1x_watchdog_line_without_seqnum_is_a_collective_timeout(tmp_path, cli_json):
    # PyTorch 1.x prints WorkNCCL(OpType=..., Timeout(ms)=...) with no SeqNum field.
    log = tmp_path / "rank3.log"
    log.write_text(
        "[E ProcessGroupNCCL.cpp:566] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800995 milliseconds before timing out.\n"
    )
    report = cli_json("--log", log)
    assert report["verdict"]["cause"] == "collective"
    assert "rank 3: ALLREDUCE timed out after 1800995 ms" in evidence_of(report, "collective")


def test_a_global_rank_announced_twice_is_rendezvous_evidence(tmp_path, cli_json):
    case = yaml.safe_load((CASES / "lightning-4389.yaml").read_text())
    log = tmp_path / "slurm.out"
    log.write_text(case["log"])
    report = cli_json("--log", log)
    assert report["verdict"]["cause"] == "rendezvous"
    found = evidence_of(report, "rendezvous")
    assert "two processes announced global rank 0, 1, 2, 3" in found
    assert "global rank 4, 5, 6, 7 of 8 never announced itself" in found


def test_ranks_that_never_announce_themselves_are_named(tmp_path, cli_json):
    case = yaml.safe_load((CASES / "lightning-5651.yaml").read_text())
    log = tmp_path / "train.log"
    log.write_text(case["log"])
    report = cli_json("--log", log)
    assert "global rank 1, 2, 3, 4, 5, 6, 7 of 8 never announced itself" in evidence_of(report, "rendezvous")


def test_a_complete_census_says_nothing(tmp_path, cli_json):
    log = tmp_path / "train.log"
    log.write_text(
        "".join(f"initializing ddp: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4\n" for r in (1, 0, 3, 2))
        + "All distributed processes registered. Starting with 4 processes\n"
    )
    report = cli_json("--log", log)
    assert "rank census" not in str(report)
    assert "never announced" not in str(report) and "two processes announced" not in str(report)


def test_lock_and_fork_warnings_name_their_cause(tmp_path, cli_json):
    lines = {
        "io-stall": "OSError: [Errno 37] No locks available",
        "dataloader": (
            "huggingface/tokenizers: The current process just got forked, after parallelism has already "
            "been used. Disabling parallelism to avoid deadlocks..."
        ),
    }
    for cause, line in lines.items():
        log = tmp_path / f"{cause}.log"
        log.write_text(line + "\n")
        report = cli_json("--log", log)
        assert report["diagnoses"][0]["cause"] == cause, (line, report["diagnoses"][:2])


def test_a_log_with_no_sign_of_a_distributed_job_damps_the_distributed_start_up_causes(tmp_path, cli_json):
    case = yaml.safe_load((CASES / "pvcnn-49.yaml").read_text())
    log = tmp_path / "train.log"
    log.write_text(case["log"])
    single = cli_json("--log", log, "--answer", "phase=start")
    ranked = [d["cause"] for d in single["diagnoses"]]
    assert ranked[0] == "compile" and ranked.index("compile") < ranked.index("rendezvous")
    assert "probably a single-process job" in evidence_of(single, "rendezvous")

    log.write_text(case["log"] + "initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/2\n")
    distributed = cli_json("--log", log, "--answer", "phase=start")
    assert "single-process" not in str(distributed)


def test_ranks_stopped_at_different_batches_are_collective_evidence(tmp_path, cli_json):
    case = yaml.safe_load((CASES / "torchtitan-1618.yaml").read_text())
    log = tmp_path / "train.log"
    log.write_text(case["log"])
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    assert report["verdict"]["cause"] == "collective"
    assert "rank 0 at batch 87, rank 1 at batch 89" in evidence_of(report, "collective")


def test_ranks_one_line_apart_are_not_a_skew(tmp_path, cli_json):
    # rank 1's line for step 41 is buffered behind rank 0's: interleaving, not a hang of one rank
    log = tmp_path / "train.log"
    log.write_text(
        "".join(f"[rank{r}]: step {s} loss 2.0\n" for s in range(35, 42) for r in (0, 1)) + "[rank0]: step 42\n"
    )
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    assert "rank progress" not in str(report) and "stopped at different points" not in str(report)


def test_ranks_printing_into_each_others_lines_are_read_apart(tmp_path, cli_json):
    # two torchrun ranks printing at the same moment, as recorded from a real gloo job:
    # "[rank0] step 5 loss 0.3646[rank1] step 5 loss 0.2783" -- both are at step 5
    log = tmp_path / "train.log"
    log.write_text(
        "".join(f"[rank0] step {s} loss 0.3{s}[rank1] step {s} loss 0.2{s}\n\n" for s in range(6))
        + "saving checkpoint to /ckpt\n"
    )
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    assert "rank progress" not in str(report)
    # the same with torchrun's own prefix ("[rank0]:"), which the divergence reading takes
    log.write_text("".join(f"[rank0]: step {s} loss 0.3{s}[rank1]: step {s} loss 0.2{s}\n" for s in range(6)))
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    assert "rank progress" not in str(report) and "rank divergence" not in str(report)
    log.write_text("".join(f"[rank0] step {s} loss 0.3[rank1] step {min(s, 2)} loss 0.2\n" for s in range(6)))
    assert "rank 0 at step 5, rank 1 at step 2" in str(cli_json("--log", log, "--answer", "phase=mid-run"))


def test_ranks_whose_last_shared_lines_differ_diverged(tmp_path, cli_json):
    # every rank writes the same lines, evaluation included; rank 1 went into its second evaluation,
    # rank 0 never did
    def steps(epoch):
        return "".join(f"[rank{r}]: epoch {epoch} step {s} loss 1.5\n" for s in range(10, 14) for r in (0, 1))

    evaluation = "[rank0]: running evaluation on 500 samples\n[rank1]: running evaluation on 500 samples\n"
    shared = steps(1) + evaluation + steps(2)
    log = tmp_path / "train.log"
    log.write_text(shared + "[rank1]: running evaluation on 500 samples\n")
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    assert "rank divergence: ranks stopped at different lines" in str(report), report["diagnoses"][:2]
    assert "rank 0 last wrote 'epoch 2 step 13 loss 1.5'" in evidence_of(report, "collective")

    # lines only rank 0 writes (its metrics) say nothing about where the others are
    log.write_text(shared + "[rank0]: saved metrics to metrics.json\n")
    assert "rank divergence" not in str(cli_json("--log", log, "--answer", "phase=mid-run"))


def test_only_some_of_the_worlds_ranks_wrote_the_last_line(tmp_path, cli_json):
    case = yaml.safe_load((CASES / "vall-e-86.yaml").read_text())  # icefall's "(rank/world)" prefix
    log = tmp_path / "train.log"
    log.write_text(case["log"])
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    said = evidence_of(report, "collective")
    # ranks 0-3 wrote nothing in this log (another node's console may hold them): the weaker reading
    assert "only ranks 4-7 of 8 reached 'Computing validation loss'; ranks 0-3 wrote nothing in this log" in said
    assert report["diagnoses"][0]["cause"] == "collective"


def test_a_finished_training_loop_points_at_what_runs_at_exit(tmp_path, cli_json):
    """The last thing the job said is that training finished; the Ctrl+C traceback the reporter
    pasted after it is the interrupt, not what the job was doing."""
    case = yaml.safe_load((CASES / "fairseq-4619.yaml").read_text())
    log = tmp_path / "train.log"
    log.write_text(case["log"])
    report = cli_json("--log", log)
    ranked = [d["cause"] for d in report["diagnoses"]]
    assert ranked[0] == "external-service" and {"collective", "thread-deadlock"} <= set(ranked[:3]), ranked
    assert "W&B documents this hang at the end of distributed training" in evidence_of(report, "external-service")
    assert report["answers"]["phase"]["value"] == "mid-run", report["answers"]


def test_an_earlier_runs_interrupt_does_not_hide_the_new_runs_events(tmp_path, cli_json):
    case = yaml.safe_load((CASES / "fairseq-4619.yaml").read_text())
    log = tmp_path / "nohup.out"
    # the interrupted run, then a new one appended to the same file that ends in a checkpoint save
    log.write_text(case["log"] + "\nKeyboardInterrupt\nStarting training\nSaving checkpoint to /ckpt/step_100.pt\n")
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    assert report["diagnoses"][0]["cause"] == "checkpoint-save", [d["cause"] for d in report["diagnoses"][:3]]
    assert "training finished and the job hangs at its end" not in str(report)  # the old run's last event


def test_ddp_reducer_line_says_the_job_is_distributed(tmp_path, cli_json):
    log = tmp_path / "train.log"
    log.write_text("loading data\nbuilding model\n")
    assert "single-process" in str(cli_json("--log", log, "--answer", "phase=start"))
    log.write_text("loading data\nmmcv - INFO - Reducer buckets have been rebuilt in this iteration.\nbuilding model\n")
    assert "single-process" not in str(cli_json("--log", log, "--answer", "phase=start"))
    # mid-run, with nothing else known: collective is a candidate (every DDP step waits for every
    # rank), at the low confidence thin evidence deserves
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    assert "the job trains with DDP" in evidence_of(report, "collective")
    assert report["diagnoses"][0]["confidence"] < 0.5 and not report["verdict"].get("cause")


def test_a_wrapped_watchdog_line_is_still_a_collective_timeout(tmp_path, cli_json):
    case = yaml.safe_load((CASES / "autocast-381.yaml").read_text())
    log = tmp_path / "slurm.out"
    log.write_text(case["log"])
    report = cli_json("--log", log)
    assert "NCCL watchdog on rank 0: a collective timed out" in evidence_of(report, "collective")
    # the timeout came after Lightning's fit loop ended: the code after fit (a save one rank makes) held the
    # ranks, and that reading of the max_epochs line outweighs the line alone
    assert "the ranks timed out after training ended" in evidence_of(report, "checkpoint-save")
    assert report["diagnoses"][0]["cause"] == "checkpoint-save", [d["cause"] for d in report["diagnoses"]]


def test_one_loop_counting_to_different_totals_on_different_ranks_is_uneven_inputs(tmp_path, cli_json):
    # each rank prints "step i/len(loader)"; rank 1's loader is shorter: it left the loop first
    log = tmp_path / "train.log"
    log.write_text(
        "".join(f"[rank0]: epoch 0 step {s}/5 loss 0.9\n" for s in range(3))
        + "".join(f"[rank1]: epoch 0 step {s}/3 loss 0.8\n" for s in range(3))
    )
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    assert "rank 0 counts to 5, rank 1 counts to 3" in evidence_of(report, "collective"), report["diagnoses"][:2]
    # tqdm bars behind torchrun's prefix (tqdm's default bar_format: "| n/total [elapsed<...")
    log.write_text(
        "[rank0]:Epoch 0:  40%|####      | 2/5 [00:01<00:01,  2.00it/s]\n"
        "[rank1]:Epoch 0:  67%|######6   | 2/3 [00:01<00:00,  2.00it/s]\n"
    )
    report = cli_json("--log", log, "--answer", "phase=mid-run")
    assert "rank 0 counts to 5, rank 1 counts to 3" in evidence_of(report, "collective")
    # the same totals on every rank: no such line
    log.write_text("".join(f"[rank{r}]: epoch 0 step {s}/5 loss 0.9\n" for s in range(3) for r in (0, 1)))
    assert "uneven loop lengths" not in str(cli_json("--log", log, "--answer", "phase=mid-run"))
