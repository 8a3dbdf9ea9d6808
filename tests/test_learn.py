"""The pieces of `harness learn`: generalising a root-cause line, the shape of a change, which steps
of a journal count, and the playbook file it writes. (The whole loop: test_learn_e2e.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from harness.errors import BadInput
from harness.learn.propose import Proposal, steps
from harness.learn.shape import declared_fix, reproduces
from harness.learn.signature import generalise
from harness.learn.write import render, write
from harness.playbook import read_file, shipped_dir

CONFIG = """\
# the run's config
rollout:
  token_margin: 2048   # tokens kept free
  n: 4
trainer:
  lr: 0.05
"""


# ---------------------------------------------------------------- generalise

@pytest.mark.parametrize("line, other_night, other_failure", [
    ("ValueError: Weights ['decoder.final_layernorms.0.weight'] not found in checkpoint /tmp/ck-a1/actor.npz",
     "ValueError: Weights ['decoder.final_layernorms.3.weight'] not found in checkpoint /data/run7/actor.npz",
     "ValueError: Weights ['decoder.final_layernorm.weight'] found twice"),
    ("ProxyError: Unable to connect to proxy http://127.0.0.1:9 for http://127.0.0.1:35329: [Errno 111] Connection refused",
     "ProxyError: Unable to connect to proxy http://10.0.0.2:3128 for http://node-3:8000: [Errno 111] Connection refused",
     "ConnectionError: Unable to connect to http://127.0.0.1:8000"),
    ("RuntimeError: HCCL timeout on rank 3 after 1800s at 10.0.0.12:29500 (op id 0x7f3a9c00, tag 9f2c44ab01)",
     "RuntimeError: HCCL timeout on rank 11 after 600s at 10.0.3.1:29501 (op id 0x1, tag 0a0b0c0d0e)",
     "RuntimeError: NCCL error on rank 3"),
])
def test_generalise_masks_what_varies_and_keeps_the_words(line, other_night, other_failure):
    rx = re.compile(generalise(line))
    assert rx.search(line) and rx.search(other_night)
    assert not rx.search(other_failure)
    assert "/tmp" not in rx.pattern and "35329" not in rx.pattern and "0x7f3a9c00" not in rx.pattern


def test_generalise_starts_at_the_first_word_and_stops_after_enough():
    rx = generalise("2026-12-03 10:00:01,123 ERROR " + " ".join(f"word{i}x" for i in range(40)))
    assert rx.startswith("ERROR")  # the timestamp is no anchor
    assert rx.count("word") == 11  # ERROR + 11 words: MAX_WORDS, the rest of the tail left out
    assert generalise("ZeroDivisionError (at File \"/w/r.py\", line 3, in f)") is None  # one word: too little
    assert generalise("12345 0x1f /tmp/x") is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=160))
def test_generalised_regex_always_matches_its_own_line(text):
    rx = generalise(text)
    if rx is not None:
        assert re.search(rx, text.strip())


# ---------------------------------------------------------------- the shape of a change

def test_one_yaml_key_is_a_set_yaml_fix_that_reproduces_the_change():
    after = CONFIG.replace("token_margin: 2048", "token_margin: 16384")
    fix, why = declared_fix({"config.yaml": (CONFIG, after)})
    assert fix == {"kind": "set_yaml", "file": "config.yaml", "key": "rollout.token_margin", "value": "16384"}
    assert reproduces(fix, {"config.yaml": (CONFIG, after)})[0]
    added = CONFIG.replace("  n: 4\n", "  n: 4\n  seed: true\n")
    fix, _ = declared_fix({"config.yaml": (CONFIG, added)})
    assert fix["key"] == "rollout.seed" and fix["value"] == "true"


def test_two_yaml_keys_are_one_replacement_not_a_key():
    after = CONFIG.replace("token_margin: 2048", "token_margin: 4096").replace("n: 4", "n: 8")
    fix, _ = declared_fix({"config.yaml": (CONFIG, after)})
    assert fix["kind"] == "replace" and reproduces(fix, {"config.yaml": (CONFIG, after)})[0]


def test_a_replacement_takes_enough_context_to_be_unique():
    before = "def f():\n    return 1\n\ndef g():\n    return 1\n"
    after = "def f():\n    return 1\n\ndef g():\n    return 2\n"
    fix, _ = declared_fix({"m.py": (before, after)})
    assert fix["old"] == "def g():\n    return 1\n" and fix["new"] == "def g():\n    return 2\n"
    assert before.count(fix["old"]) == 1 and reproduces(fix, {"m.py": (before, after)})[0]
    inserted = before.replace("def g():\n", "def g():\n    x = 0\n")
    fix, _ = declared_fix({"m.py": (before, inserted)})
    assert fix["old"] and reproduces(fix, {"m.py": (before, inserted)})[0]


def test_changes_without_a_declared_shape_say_why():
    assert declared_fix({})[0] is None
    two = {"a.py": ("x\n", "y\n"), "b.py": ("x\n", "z\n")}
    assert "2 files" in declared_fix(two)[1]
    assert "added" in declared_fix({"n.py": (None, "x\n")})[1]
    big = "".join(f"line {i}\n" for i in range(100))
    assert "code change" in declared_fix({"m.py": (big, big.replace("line", "LINE"))})[1]
    ok, why = reproduces({"kind": "replace", "file": "m.py", "old": "nothere", "new": "x"}, {"m.py": ("a\n", "b\n")})
    assert not ok and "not found" in why


# ---------------------------------------------------------------- which steps count

def _ev(type, **kw):
    return {"type": type, "t": 0.0, **kw}


def _verdict(n, outcome, lsp, failed, fp):
    return _ev("verdict", attempt=n, outcome=outcome, last_stage_passed=lsp, failed_stage=failed, reason="exited",
               root={"text": "x", "signature": "s"} if outcome != "pass" else None, fingerprint=fp)


def test_steps_keep_forward_agent_changes_and_say_why_for_the_rest():
    events = [_ev("session", session="s", host="h", workdir="/w", spec={})]
    for n in range(1, 7):
        events.append(_ev("launch", attempt=n, run_id=f"r{n}", pid=1, sha="0"))
        verdict = {1: (1, 2, "A"), 2: (2, 3, "B"), 3: (1, 2, "C"), 4: (3, 4, "E"), 5: (1, 2, "A"), 6: None}[n]
        events.append(_verdict(n, "crash", *verdict) if verdict else _verdict(n, "pass", 7, None, "P"))
        if n in (1, 2, 3, 5):
            events.append(_ev("tool", attempt=n, name="relaunch", end="relaunch", summary=f"fix {n}"))
        if n == 4:
            events.append(_ev("fix", attempt=4, signature="known", kind="set_env", description="set X=1",
                              applied=True, files=[]))
    got = {s.attempt: s for s in steps(events)}
    assert "came back in attempt 5" in got[1].skip  # fingerprint A again
    assert "got less far (1 stages against 2)" in got[2].skip
    assert got[3].skip == "" and got[3].advanced and got[3].summary == "fix 3" and got[3].next == 4
    assert "declared fix already (known: set X=1)" in got[4].skip
    assert got[5].skip == "" and got[5].next == 6 and got[5].advanced
    assert 6 not in got  # a pass: nothing to learn


# ---------------------------------------------------------------- the file

def _proposal(n, **entry):
    base = {"id": f"learned_x_{n}", "regex": f"Boom number {n} happened", "evidence": f"session S{n} attempt {n}",
            "category": "other", "stage": "reward", "hint": "line one\nline two"}
    return Proposal(n, f"S{n}", "hint", base | entry)


def test_the_file_extends_the_session_playbook_and_grows_night_after_night(tmp_path):
    out = tmp_path / "team-learned.yaml"
    write(render([_proposal(1)], out, ["minichain"], ["S1"]), out)
    pb = read_file(out)
    assert pb.name == "team-learned" and pb.extends == ["minichain"] and pb.signatures[0].hint == "line one\nline two"
    assert "hint: |" in out.read_text()  # a multi-line hint stays readable
    write(render([_proposal(2), _proposal(1, hint="again")], out, ["minichain"], ["S2"]), out)
    pb = read_file(out)
    assert [s.id for s in pb.signatures] == ["learned_x_1", "learned_x_2"] and pb.signatures[0].hint == "again"
    assert "S1" in pb.description and "S2" in pb.description
    # the next night's session used this very file: it is not its own parent
    write(render([_proposal(3)], out, ["minichain", str(out)], ["S3"]), out)
    assert read_file(out).extends == ["minichain"]


def test_the_file_is_never_written_half_or_into_the_package(tmp_path):
    out = tmp_path / "bad.yaml"
    with pytest.raises(Exception):
        write(render([_proposal(1, regex="(unclosed")], out, ["minichain"], ["S1"]), out)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(BadInput, match="inside the installed harness"):
        write("name: x\n", shipped_dir() / "x.yaml")
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: mine\n")
    with pytest.raises(BadInput, match="did not write"):
        render([_proposal(1)], mine, ["minichain"], ["S1"])
    with pytest.raises(BadInput, match="no such directory"):
        write("name: y\n", tmp_path / "nope" / "y.yaml")
    assert yaml.safe_load(mine.read_text()) == {"name": "mine"}


def test_the_report_says_which_fixes_a_learned_playbook_made():
    from harness.report import markdown

    origin = "pangu-learned ($HARNESS_PLAYBOOKS), learned from session 20261201-010203-ab12 attempt 3"
    events = [_ev("session", session="s", host="h", workdir="/w", spec={}),
              _ev("launch", attempt=1, run_id="r1", pid=1, sha="0"), _verdict(1, "crash", 1, 2, "A"),
              _ev("fix", attempt=1, signature="learned_x", kind="replace", description="m.py: a -> b", applied=True,
                  files=["m.py"], origin=origin),
              _ev("launch", attempt=2, run_id="r2", pid=1, sha="1"), _verdict(2, "crash", 2, 3, "B"),
              _ev("fix", attempt=2, signature="learned_y", kind="replace", description="m.py: text not found",
                  applied=False, files=[], origin=origin),
              _ev("fix", attempt=2, signature="shipped", kind="set_env", description="set X=1", applied=True,
                  files=[], origin="minichain (shipped)")]
    text = markdown(events)
    assert "m.py: a -> b — fixed by the learned playbook pangu-learned (from session 20261201-010203-ab12)" in text
    assert "text not found (a fix of the learned playbook pangu-learned, from session 20261201-010203-ab12)" in text
    assert "set X=1 —" not in text and "set X=1 (" not in text
