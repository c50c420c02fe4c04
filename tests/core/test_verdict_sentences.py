"""The verdict's sentences for a live job watched and not told apart from a slow one."""

from debug_stuck.core.report import Diagnosis, Verdict
from debug_stuck.core.verdict import compose, lead


def _top() -> Diagnosis:
    return Diagnosis("dataloader", "DataLoader workers stalled, deadlocked or dead", 0.93, [], [], "dataloader")


def test_an_undecided_job_says_so_first_and_names_the_cause_only_as_what_it_would_be():
    waits = "pid 10 (rank) waits for its DataLoader workers while all 2 of them compute"
    verdict = Verdict(hung=None, cause="dataloader", confidence=0.93, state_reasons=[waits])
    verdict.finding = {"kind": "chain", "text": "DataLoader worker pid 11 keeps running, never waiting"}
    said = compose(verdict, [_top()])
    assert said.startswith(f"Not judged hung from this window: {waits}."), said
    assert "If it is stuck, the likeliest cause: DataLoader workers stalled" in said
    assert "Most likely" not in said
    assert lead(verdict, [_top()]).startswith("Not judged hung"), lead(verdict, [_top()])


def test_a_hung_job_and_a_log_reading_keep_their_most_likely_cause():
    hung = Verdict(hung=True, state="hung", cause="dataloader", confidence=0.93, state_reasons=["no stack moved"])
    hung.finding = {"kind": "chain", "text": "DataLoader worker pid 11 waits in read"}
    said = compose(hung, [_top()])
    assert said.startswith("DataLoader worker pid 11 waits in read. Most likely: DataLoader"), said
    assert said.endswith("Evidence of the hang: no stack moved."), said
    from_log = compose(Verdict(hung=None, cause="dataloader", confidence=0.93), [_top()])
    assert from_log.startswith("Most likely: DataLoader workers stalled"), from_log


def test_an_undecided_job_names_no_cause_it_only_guesses():
    verdict = Verdict(hung=None, cause="compile", confidence=0.45, state_reasons=["pid 10 (rank) waits for its thread"])
    verdict.finding = {"kind": "chain", "text": "Process pid 10 waits for an item from a queue"}
    guess = Diagnosis("compile", "A compiler is compiling for a very long time", 0.45, [], [], "compile")
    said = compose(verdict, [guess])
    assert "compil" not in said.lower() and "likeliest" not in said, said
    assert said.startswith("Not judged hung from this window: pid 10 (rank) waits for its thread."), said


def test_a_start_up_cause_found_mid_run_keeps_no_start_up_phase(knowledge):
    # a breakpoint() left in the loop at step 50: input-wait, whose playbook says start-up; the log said mid-run
    from debug_stuck.core.answers import Answer
    from debug_stuck.core.classify import cause_phase

    assert knowledge.playbooks["input-wait"].phase == "startup"
    assert cause_phase(knowledge, "input-wait", {"phase": Answer("phase", "mid-run", "log")}) == "unknown"
    assert cause_phase(knowledge, "input-wait", {"phase": Answer("phase", "start", "user")}) == "startup"
    assert cause_phase(knowledge, "input-wait", {}) == "startup"
    assert cause_phase(knowledge, "checkpoint-save", {"phase": Answer("phase", "mid-run", "log")}) == "checkpoint"
