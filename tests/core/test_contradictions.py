"""Candidates that contradict the job's facts are not ranked: the playbooks' `requires_any` /
`excluded_when` are data, checked by `skills check` and applied the same way to every cause."""

import shutil

from debug_stuck.core.classify import Observations, ObservedLine, classify
from debug_stuck.core.contradictions import Conditions, drop_contradicted
from debug_stuck.kb import check_knowledge, skills_dir


def test_the_playbooks_say_which_job_facts_their_causes_need(knowledge):
    conditions = knowledge.job_conditions
    for cause in ("collective", "rendezvous", "nccl-init", "network"):
        assert "single-process" in conditions[cause].excluded_when, cause
    assert set(conditions["dataloader"].requires_any) == {"worker-process", "dataloader-frame"}


def test_a_condition_holds_or_rules_out():
    needs = Conditions(requires_any=("worker-process", "dataloader-frame"))
    alone = Conditions(excluded_when=("single-process",))
    assert needs.contradiction({"dataloader-frame"}) is None
    assert "none of worker-process, dataloader-frame" in needs.contradiction({"single-process"})
    assert alone.contradiction({"distributed"}) is None
    assert alone.contradiction({"single-process"}).startswith("the job is single-process")


def test_facts_rule_candidates_out_and_the_verdict_moves_to_the_best_left(knowledge):
    obs = Observations()
    obs.add("stack", ObservedLine("_try_get_data (torch/utils/data/dataloader.py:1133)"))
    obs.add("stack", ObservedLine("all_reduce (torch/distributed/distributed_c10d.py:3252)"))
    result = classify(knowledge, {}, obs)
    before = [d.cause for d in result.diagnoses]
    assert {"dataloader", "collective"} <= set(before)
    notes = drop_contradicted(knowledge, result, {"single-process"})
    after = [d.cause for d in result.diagnoses]
    assert "collective" not in after and "dataloader" not in after, after
    assert any(n.startswith("not ranked: collective") for n in notes), notes
    assert result.verdict.cause in (after[:1] + [None])
    # from logs alone nothing is known about the job: nothing is ruled out
    again = classify(knowledge, {}, obs)
    assert drop_contradicted(knowledge, again, None) == [] and [d.cause for d in again.diagnoses] == before


def test_a_gpu_probe_is_not_offered_on_a_machine_with_no_gpu(knowledge):
    """cpu-spin's playbook names the MIOpen probe (ROCm kernel search spins a core); on a machine
    with no GPU driver (the seventh hunt's h_spawn_eval, platform cpu) it is not offered, the env
    audit still is. With GPUs, or nothing known, both are."""
    obs = Observations()
    obs.add("process", ObservedLine("role=rank state=R cpu=99 stack=frozen"))

    def offered(facts):
        result = classify(knowledge, {}, obs)
        drop_contradicted(knowledge, result, facts)
        spin = next(d for d in result.diagnoses if d.cause == "cpu-spin")
        return {p["name"] for p in spin.probe_items}

    assert {"miopen", "env"} <= offered(None) and {"miopen", "env"} <= offered({"single-process"})
    assert "miopen" not in offered({"no-gpu"}) and "env" in offered({"no-gpu"})


def test_skills_check_names_a_condition_on_an_unknown_fact(tmp_path):
    folder = tmp_path / "skills"
    shutil.copytree(skills_dir(), folder)
    path = folder / "network.md"
    path.write_text(path.read_text().replace("excluded_when: [single-process]", "excluded_when: [one-gpu]", 1))
    _, problems = check_knowledge(folder)
    assert any(p.file == "network.md" and p.field == "excluded_when" and "job facts" in p.message for p in problems)


def test_a_frame_of_any_distributed_library_makes_the_job_distributed(knowledge):
    # one process, no WORLD_SIZE, no torch.distributed frame: jax.distributed's frame (frames.yaml
    # `facts: [distributed]`) still says peers exist, as in bench/gpu_check.py's jax_init job on an H100
    from debug_stuck.live.collect import Snapshot
    from debug_stuck.live.jobfacts import job_facts
    from debug_stuck.probes.collectors.procs import ProcInfo
    from debug_stuck.probes.collectors.stacks import Frame, StackDump, StackSeries, ThreadStack

    def one_process(frame: Frame) -> Snapshot:
        thread = ThreadStack(tid=852, name="MainThread", state="idle", frames=[frame])
        series = StackSeries(pid=852, dumps=[StackDump(pid=852, threads=[thread], tool="py-spy", seconds=0.1)])
        process = ProcInfo(pid=852, ppid=1, name="python3", cmdline=["python3", "train.py"], role="rank")
        return Snapshot(host="h", taken_at=0.0, window=1.0, processes=[process], stacks={852: series})

    jax_init = one_process(Frame("State.initialize", "jax/_src/distributed.py", 218))
    assert "distributed" in job_facts([jax_init], knowledge.frames)
    assert job_facts([jax_init]) == {"single-process"}  # without the table, only torch's files tell
    plain = one_process(Frame("train_step", "train.py", 40))
    assert job_facts([plain], knowledge.frames) == {"single-process"}


def test_skills_check_names_a_frame_entry_without_its_facts(tmp_path):
    folder = tmp_path / "skills"
    shutil.copytree(skills_dir(), folder)
    path = folder / "data" / "frames.yaml"
    text = path.read_text()
    entry = text.index("- id: jaxlib-block-until-ready-native")
    facts = text.index("  facts: []\n", entry)
    path.write_text(text[:facts] + text[facts + len("  facts: []\n") :])
    _, problems = check_knowledge(folder)
    assert any(p.field == "frames.jaxlib-block-until-ready-native.facts" for p in problems), problems


def test_a_log_message_only_several_processes_print_makes_a_lone_process_distributed(knowledge):
    # worker 0 of a two-worker TF_CONFIG cluster, alone on its machine, its log saying "Waiting for 1/2
    # tasks to connect" (tests/fixtures/tensorflow): the rendezvous is not ruled out as single-process
    from debug_stuck.live.collect import Snapshot
    from debug_stuck.live.jobfacts import job_facts
    from debug_stuck.probes.collectors.procs import ProcInfo

    process = ProcInfo(pid=9847, ppid=1, name="python", cmdline=["python", "mwms.py"], role="rank")
    alone = Snapshot(host="h", taken_at=0.0, window=1.0, processes=[process])
    assert job_facts([alone], knowledge.frames) == {"single-process"}
    assert "rendezvous-waiting" in knowledge.distributed_log_facts
    assert job_facts([alone], knowledge.frames, ["rendezvous-waiting"]) == {"distributed"}


def test_a_trainer_and_the_child_it_runs_are_one_training_process(knowledge):
    # the fifth hunt's subprocess_eval_silent: `python train.py` (a rank to the tool) runs
    # `subprocess.run([python, evaluate.py])` (role other) and waits for it; collective was ranked
    # second (25%) in a job with nothing to meet. Two ranks are still not one.
    from debug_stuck.live.collect import Snapshot
    from debug_stuck.live.jobfacts import job_facts
    from debug_stuck.probes.collectors.procs import ProcInfo

    trainer = ProcInfo(pid=15171, ppid=1, name="python", cmdline=["python", "train.py"], role="rank")
    child = ProcInfo(pid=20316, ppid=15171, name="python", cmdline=["python", "evaluate.py", "400000"], role="other")
    snap = Snapshot(host="h", taken_at=0.0, window=1.0, processes=[trainer, child])
    assert job_facts([snap], knowledge.frames) == {"single-process"}
    second = ProcInfo(pid=15172, ppid=1, name="python", cmdline=["python", "train.py"], role="rank")
    assert "single-process" not in job_facts(
        [Snapshot(host="h", taken_at=0.0, window=1.0, processes=[trainer, second])]
    )
