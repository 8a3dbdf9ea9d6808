"""The analyzer on the labelled real-world corpus (../shared/corpus/realworld*): floors for the
shares the README reports. A drop below a floor is a regression; raise a floor when the
analyzer improves. No file is special-cased anywhere (see tests/corpus_eval.py for scoring)."""

import pytest

from corpus_eval import cases, evaluate, shares

pytestmark = pytest.mark.skipif(not cases(), reason="../shared/corpus is not beside the repo")

FLOORS = {"stage": 0.90, "category": 0.90, "digest": 1.0, "chosen": 0.88}


@pytest.fixture(scope="module")
def rows():
    return evaluate()


def test_every_corpus_case_is_analysed(rows):
    assert len(rows) >= 50
    for case, verdict, _ in rows:
        assert verdict["outcome"] in ("pass", "crash", "hang", "wrong_result", "running", "unknown"), case["file"]


@pytest.mark.parametrize("key", sorted(FLOORS))
def test_share_meets_floor(rows, key):
    got = shares(rows)[key]
    misses = [c["id"] for c, _, s in rows if not s[key]]
    assert got >= FLOORS[key], f"{key}: {got:.0%} < {FLOORS[key]:.0%}; misses: {misses}"


def test_passing_runs_have_no_root_cause(rows):
    for case, verdict, _ in rows:
        if case["outcome"] == "pass":
            assert verdict["outcome"] == "pass" and verdict["root_cause"] is None, case["file"]
