"""The literal prefilters may only ever skip work, never a match."""

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.analyze.lines import make_line
from harness.patterns import Matchers, rare_start, required_literals
from harness.playbook import load_playbook, shipped_names
from corpus_eval import SHARED

ROOT = Path(__file__).resolve().parent.parent
LOGS = sorted((ROOT / "fixtures" / "logs").glob("*.log")) + sorted((SHARED / "corpus").glob("*/*.log"))


@pytest.mark.parametrize("pattern, expected", [
    (r"init engine \(profile", ["init engine (profile"]),
    (r"^(?:Training from scratch|Resuming from \S+)$", ["Resuming from ", "Training from scratch"]),
    (r"(?:GPU|NPU)? ?KV cache size: [\d,]+ tokens", ["KV cache size: "]),
    (r"^(?=.*precision)(?=.*fp16)", ["precision"]),
    (r"(?i)No Valid Rounds", ["no valid rounds"]),
    (r"a(?:bc|de)", None),  # nothing of 3+ characters is required
    (r"\d+\.\d+", None),
])
def test_required_literals(pattern, expected):
    assert required_literals(pattern) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcXYZ_-: ()[]0123", min_size=1, max_size=20))
def test_rare_start_is_a_suffix(lit):
    assert lit.endswith(rare_start(lit, False))


def _sample_lines(pb, limit=4000):
    for log in LOGS:
        for raw in log.read_text("utf-8", "replace").splitlines()[:limit]:
            yield make_line(1, raw, pb.prefixes).text


@pytest.mark.parametrize("name", [None, "pangu-ascend-rl", "verl"])
def test_matchers_agree_with_plain_regex_search_on_every_real_line(name):
    pb = load_playbook(name)
    groups = pb.match.items
    checked = 0
    for text in _sample_lines(pb):
        found = pb.match.scan(text)
        for group, items in groups.items():
            expected = [obj for obj, rx in items if re.search(rx, text)]
            assert pb.match.matches(group, text, found) == expected, (group, text)
        checked += 1
    assert checked > 1000


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["Error", "error: ", "WARN", "multi-turn", " timed out", "KV cache size: 12 tokens",
                                 "step:3 - ", "loss", "EI0002", "x", " ", "precision-aware optimizer", "fp16"]),
                max_size=12))
def test_matchers_agree_on_generated_lines(parts):
    pb = load_playbook(None)
    text = "".join(parts)
    for group, items in pb.match.items.items():
        assert pb.match.matches(group, text) == [obj for obj, rx in items if re.search(rx, text)]


def test_a_pattern_without_literals_is_always_tried():
    m = Matchers({"g": [("digits", r"\d+\.\d+"), ("lit", r"hello world")]})
    assert m.matches("g", "v 1.5") == ["digits"]
    assert m.matches("g", "hello world 2.0") == ["digits", "lit"]
    assert re.compile(r"\d+\.\d+")


def test_first_chars_says_where_a_match_can_start_or_that_it_cannot_tell():
    from harness.patterns import first_chars, required_sets
    assert first_chars(r"^\((?:autoscaler|scheduler) ") == frozenset("(")
    assert first_chars(r"^(?P<level>DEBUG|INFO|WARNING) \d") == frozenset("DIW")
    assert first_chars(r"^[EWIF]\d{4} ") == frozenset("EWIF")
    assert first_chars(r"\bcuda") == frozenset("c")
    for unknown in (r"^\d{4}-", r"^a?b", r"(?i)^info", r"^(?=x)x", r"^[^x]", r"^\w+:"):
        assert first_chars(unknown) is None, unknown
    # every top-level set is required: the gate scans one and confirms with the others
    assert required_sets(r"^step:[1-9]\d* - .*(?:actor/|update_actor)") == [["step:"], [" - "],
                                                                             ["actor/", "update_actor"]]
    assert required_sets(r"(?i)CUDA out of memory") == [["cuda out of memory"]]


@pytest.mark.parametrize("name", [None, *shipped_names()])
def test_every_shipped_playbook_leaves_the_analyzer_a_gate(name):
    """The analyzer's gate skips the lines no pattern can match; one pattern without a literal it can
    scan for (`\\^\\^`: two characters, under the shortest it keeps) would leave it none, and every
    line of a night's log would be looked at closely — the same verdict, three times slower."""
    from harness.analyze import Analyzer

    assert Analyzer(load_playbook(name)).gate is not None
