"""Two readings an expert makes of a thin log: a watchdog timeout while the job saves is the save's
fault, and a log that ends with the c10d store listening is a rendezvous that never completed."""

import contextlib
import io
import json

from debug_stuck.frontends.cli import main

# ProcessGroupNCCL's watchdog line (torch 2.x format string, ProcessGroupNCCL.cpp)
WATCHDOG = (
    "[rank1]:[E109 22:46:25.933 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=493, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600044 milliseconds "
    "before timing out."
)
# torch c10d socket.cpp, SocketListenOp (info level)
LISTENING = "[I socket.cpp:522] [c10d] The server socket has started to listen on [::]:23456."


def diagnose(tmp_path, lines, *answers) -> dict:
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    flags = [item for answer in answers for item in ("--answer", answer)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["diagnose", "--log", str(log), *flags, "--format", "json"]) == 0
    return json.loads(out.getvalue())


def ranked(report) -> list:
    return [d["cause"] for d in report["diagnoses"]]


def details(report, cause) -> str:
    found = next(d for d in report["diagnoses"] if d["cause"] == cause)
    return " ".join(e["detail"] for e in found["evidence"])


def test_a_watchdog_timeout_while_the_job_saved_blames_the_save(tmp_path):
    alone = diagnose(tmp_path, ["step 5000 loss 1.2", WATCHDOG])
    assert ranked(alone)[0] == "collective", ranked(alone)
    saving = diagnose(tmp_path, ["step 5000 loss 1.2", WATCHDOG], "event=checkpoint")
    assert ranked(saving)[0] == "checkpoint-save", ranked(saving)
    said = details(saving, "checkpoint-save")
    assert "timed out waiting (collective-timeout) while the job saved a checkpoint" in said, said
    assert saving["verdict"]["confidence"] >= 0.5


def test_the_answer_does_not_replace_what_the_log_says_came_before_the_timeout(tmp_path):
    # the log's own last event before the timeout (a rank entering a collective, TORCH_DISTRIBUTED_DEBUG=DETAIL's
    # ProcessGroupWrapper line) is what the job did: the answer does not override it
    entered = "[Rank 0] Running collective: " + "CollectiveFingerPrint(SequenceNumber=493, OpType=ALLREDUCE)"
    report = diagnose(tmp_path, [entered, WATCHDOG], "event=checkpoint")
    assert "while the job saved" not in json.dumps(report)
    assert "the last thing logged before the timeout was a rank entering a collective" in details(report, "collective")


def test_a_log_that_ends_with_the_store_listening_is_a_rendezvous(tmp_path):
    report = diagnose(tmp_path, ["Using distributed PyTorch with gloo backend", LISTENING], "phase=start")
    assert ranked(report)[0] == "rendezvous", ranked(report)
    assert "the c10d store listens for the ranks" in details(report, "rendezvous")
    # the same line early in a log that goes on training says nothing about the hang
    later = diagnose(tmp_path, [LISTENING] + [f"step {n} loss 1.0" for n in range(1, 6)], "phase=mid-run")
    assert "the c10d store listens" not in json.dumps(later)


def test_a_watchdog_timeout_after_training_ended_blames_the_code_after_fit(tmp_path):
    # Lightning's fit loop prints it when max_epochs is reached (lightning 2.x fit_loop.py, rank 0)
    ended = "`Trainer.fit` stopped: `max_epochs=10` reached."
    report = diagnose(tmp_path, ["Epoch 9: 100%|##########| 50/50 [00:05<00:00]", ended, WATCHDOG])
    assert ranked(report)[0] == "checkpoint-save", ranked(report)
    assert "the ranks timed out after training ended" in details(report, "checkpoint-save")
    # the same timeout while training still ran is the collective's own
    running = diagnose(tmp_path, ["Epoch 9:  40%|####      | 20/50 [00:02<00:03]", WATCHDOG])
    assert ranked(running)[0] == "collective", ranked(running)
