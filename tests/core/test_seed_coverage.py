"""Every hang point of the five source write-ups must be findable in its playbook.

The write-ups' facts are carried as this repository's own fixture data (tests/fixtures/seeds/
facts.yaml): the phrase, the line of the write-up it comes from, and the cause it belongs to.
"""

from pathlib import Path

import pytest
import yaml

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "seeds" / "facts.yaml"
DATA = yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))
FACTS = [(f["seed"], f["phrase"], f["cause"], f["quote"]) for f in DATA["facts"]]


def test_the_fixture_covers_every_seed_and_cause_it_names(knowledge):
    assert {seed for seed, *_ in FACTS} == set(DATA["seeds"]) == {"000", "001", "002", "003", "004"}
    assert {cause for _, _, cause, _ in FACTS} <= set(knowledge.playbooks)
    assert len(FACTS) >= 56


@pytest.mark.parametrize("seed, phrase, cause, quote", FACTS, ids=[f"{s}:{p}" for s, p, _, _ in FACTS])
def test_seed_fact_is_in_its_playbook(knowledge, seed, phrase, cause, quote):
    assert phrase in quote, "the fact drifted from the line it was taken from"
    assert phrase in knowledge.playbooks[cause].path.read_text(encoding="utf-8")


def test_every_playbook_names_its_sources(knowledge):
    cited = " ".join(" ".join(b.sources) for b in knowledge.playbooks.values()).lower()
    for seed in DATA["seeds"]:
        assert f"seed {seed}" in cited
