import itertools

import pytest

from debug_stuck.contract import CAUSE_IDS


def walk(knowledge, **answers):
    return knowledge.tree.walk({k.replace("_", "-") if k == "x" else k: (v, "user") for k, v in answers.items()})


def test_every_answer_combination_reaches_a_leaf(knowledge):
    tree = knowledge.tree
    keys = ["phase", "step", "gpu", "stuck_at", "event", "errors", "cpu", "platform", "progress", "power"]
    choices = [list(tree.questions[k].values) + ["unknown", None] for k in keys]
    # all combinations of the three triage questions x a sample of follow-ups
    for triage in itertools.product(*choices[:3]):
        for follow in itertools.islice(itertools.product(*choices[3:]), 0, None, 97):
            answers = {k: (v, "user") for k, v in zip(keys, triage + follow) if v is not None}
            result = tree.walk(answers)
            assert tree.nodes[result.leaf].is_leaf
            assert result.priors and all(c in CAUSE_IDS for c in result.priors)


def test_no_answers_still_names_candidates_and_no_pattern(knowledge):
    result = knowledge.tree.walk({})
    assert result.pattern is None
    assert result.priors
    assert "phase" in result.assumed_keys


def test_unknown_takes_the_branch_keeping_most_causes(knowledge):
    tree = knowledge.tree
    result = tree.walk({"phase": ("unknown", "user")})
    first = result.steps[0]
    assert first.key == "phase" and first.how == "assumed"
    root = tree.nodes[tree.root]
    sizes = {v: len(tree.reachable_causes(n)) for v, n in root.branches.items()}
    assert sizes[first.value] == max(sizes.values())


def test_assumed_steps_damp_the_priors(knowledge):
    answered = knowledge.tree.walk(
        {"phase": ("mid-run", "user"), "step": ("random", "user"), "gpu": ("idle", "user"), "cpu": ("busy", "user")}
    )
    guessed = knowledge.tree.walk({"phase": ("mid-run", "user"), "step": ("random", "user"), "gpu": ("idle", "user")})
    assert answered.leaf == "gpu_idle_cpu_busy"
    top_answered = max(answered.priors.values())
    assert max(guessed.priors.values()) < top_answered


@pytest.mark.parametrize(
    "answers, pattern",
    [
        ({"phase": "start"}, "A"),
        ({"phase": "start", "gpu": "busy", "step": "random"}, "A"),
        ({"phase": "mid-run", "step": "same-step"}, "D"),
        ({"phase": "mid-run", "step": "same-step", "gpu": "busy"}, "D"),
        ({"phase": "mid-run", "step": "random", "gpu": "idle"}, "B"),
        ({"phase": "mid-run", "step": "random", "gpu": "busy"}, "C"),
        ({"phase": "mid-run", "step": "random", "gpu": "idle", "errors": "hardware"}, "E"),
        ({"phase": "mid-run", "step": "random", "errors": "network"}, "E"),
        ({"phase": "mid-run", "step": "random"}, None),
        ({"phase": "mid-run"}, None),
        ({"gpu": "idle"}, None),
        ({}, None),
    ],
)
def test_pattern_follows_the_contract(knowledge, answers, pattern):
    result = knowledge.tree.walk({k: (v, "user") for k, v in answers.items()})
    assert result.pattern == pattern


def test_contract_triage_questions_are_in_the_tree(knowledge):
    q = knowledge.tree.questions
    assert set(q["phase"].values) == {"start", "mid-run"}
    assert set(q["gpu"].values) == {"idle", "busy", "none"}
    assert set(q["step"].values) == {"same-step", "random"}
    for key in ("phase", "gpu", "step"):
        assert q[key].why and q[key].text
