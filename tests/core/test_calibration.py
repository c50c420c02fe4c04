"""Calibration: a tie between the first two causes is stated, with the one question or probe that
would break it; an answer that separates them breaks it."""

from __future__ import annotations


def test_a_tie_names_the_question_that_breaks_it(cli_json):
    report = cli_json("--answer", "phase=start")
    tie = report["verdict"]["tie"]
    assert tie["causes"] == ["nccl-init", "rendezvous"]
    assert tie["breaker"].startswith("answer stuck_at (What is the last thing the job printed")
    share = report["diagnoses"][0]["confidence"]
    assert report["diagnoses"][1]["confidence"] == share  # a tie: the two share the first place
    assert f"nccl-init and rendezvous are tied at {share:.0%}: answer stuck_at" in report["verdict"]["summary"]

    broken = cli_json("--answer", "phase=start", "--answer", "stuck_at=process-group")
    assert "tie" not in broken["verdict"]
    assert [d["cause"] for d in broken["diagnoses"][:2]] == ["nccl-init", "rendezvous"]
    assert broken["diagnoses"][0]["confidence"] > broken["diagnoses"][1]["confidence"]


def test_answers_alone_never_make_a_sure_verdict(cli_json):
    """Every answer that points one way, and no evidence of the job: still "too little to tell"."""
    report = cli_json(
        "--answer", "phase=mid-run", "--answer", "step=same-step", "--answer", "event=none",
        "--answer", "gpu=idle", "--answer", "cpu=idle", "--answer", "platform=cuda",
    )  # fmt: skip
    first = report["diagnoses"][0]
    assert all(e["source"] == "answer" for e in first["evidence"]), first
    assert first["confidence"] < 0.5, first
    assert report["verdict"]["summary"].startswith("Too little to be sure"), report["verdict"]["summary"]
