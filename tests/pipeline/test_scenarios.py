"""Every seed scenario, written as answers + a log excerpt in the document's own words, must
come out with the right cause on top (and the right triage pattern)."""

import pytest
import yaml

from conftest import diagnosed as run_diagnosis
from conftest import example_request as load_example
from debug_stuck.kb import examples_dir, list_examples

EXAMPLES = sorted(list_examples())


def test_every_seed_document_has_scenarios():
    sources = " ".join(
        yaml.safe_load((examples_dir() / name / "example.yaml").read_text())["source"] for name in EXAMPLES
    )
    for seed in ("seed 000", "seed 001", "seed 002", "seed 003", "seed 004"):
        assert seed in sources
    # nanochat's five patterns and sd-scripts' eight hang points each have one
    assert len(EXAMPLES) >= 18


@pytest.mark.parametrize("name", EXAMPLES)
def test_scenario_top_cause(knowledge, name):
    meta = yaml.safe_load((examples_dir() / name / "example.yaml").read_text())
    report = run_diagnosis(load_example(knowledge, name), knowledge)
    assert report.errors == []
    assert report.verdict.cause == meta["expect"]["cause"], [(d.cause, d.confidence) for d in report.diagnoses[:3]]
    assert report.diagnoses[0].cause == meta["expect"]["cause"]
    assert report.pattern == meta["expect"]["pattern"]
    top = report.diagnoses[0]
    assert top.fixes and top.evidence


def test_log_alone_is_enough_for_strong_signatures(knowledge):
    """Without any answer, the MIOpen seed's log still names the cause and answers the questions."""
    request = load_example(knowledge, "miopen-first-batch")
    request.answers = {}
    report = run_diagnosis(request, knowledge)
    assert report.verdict.cause == "miopen-find"
    assert report.answers["phase"]["source"] == "log"
    assert report.answers["platform"] == {"value": "rocm", "source": "log", "why": report.answers["platform"]["why"]}
    assert report.pattern == "A"


def test_user_answers_override_the_log(knowledge):
    from debug_stuck.core.answers import Answer

    request = load_example(knowledge, "miopen-first-batch")
    request.answers = {"platform": Answer("platform", "cuda", "user")}
    report = run_diagnosis(request, knowledge)
    assert report.answers["platform"] == {"value": "cuda", "source": "user"}
