"""`harness eval`: the loop as a benchmark over fault scenarios, through the real CLI, real
sessions and the scripted model over real HTTP (which solves only what its script covers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.evaluate import SHIPPED, load_suite, totals

ROOT = Path(__file__).resolve().parent.parent
SUITE = {"budgets": {"relaunches": 3}, "scenarios": [
    {"name": "speculative-config", "faults": ["04-speculative-config-without-mtp"]},   # the agent's edit
    {"name": "precision-aware-optimizer", "faults": ["09-precision-aware-optimizer-fp16"]},  # a declared fix
    {"name": "swallowed-reward-field", "faults": ["more/16-reward-field-renamed-swallowed"]},  # no script for it
]}


def harness(*args, home):
    """The installed command, as a user runs it (its commands register from several modules)."""
    return subprocess.run([str(Path(sys.executable).with_name("harness")), *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=600, env={"HARNESS_HOME": str(home), "PATH": "/usr/bin:/bin"})


@pytest.mark.slow
def test_eval_rows_and_totals_for_a_suite(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump(SUITE))
    r = harness("eval", suite, "--json", "--jobs", "2", home=tmp_path / "home")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    out = json.loads(r.stdout)
    assert out["scripted"] is True
    rows = {row["scenario"]: row for row in out["rows"]}
    assert [row["scenario"] for row in out["rows"]] == [s["name"] for s in SUITE["scenarios"]]  # the suite's order
    assert rows["speculative-config"]["solved"] and rows["speculative-config"]["model_calls"] >= 1
    assert rows["precision-aware-optimizer"]["solved"] and rows["precision-aware-optimizer"]["model_calls"] == 0
    assert not rows["swallowed-reward-field"]["solved"] and rows["swallowed-reward-field"]["end"] == "gave_up"
    assert out["totals"]["solved"] == 2 and out["totals"]["scenarios"] == 3
    assert out["totals"] == totals(out["rows"])


@pytest.mark.slow
def test_eval_says_the_model_is_scripted_and_bad_suites_are_one_line(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"scenarios": [SUITE["scenarios"][1]]}))
    r = harness("eval", suite, home=tmp_path / "home")
    assert r.returncode == 0 and "The model is scripted" in r.stdout and "solved 1/1 (100%)" in r.stdout, r.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"scenarios": [{"name": "x", "faults": ["99-no-such-fault"]}]}))
    r = harness("eval", bad, home=tmp_path / "home")
    assert r.returncode == 2 and "no patch 99-no-such-fault.patch" in r.stderr and "Traceback" not in r.stderr
    r = harness("eval", tmp_path / "missing.yaml", home=tmp_path / "home")
    assert r.returncode == 2 and "no such suite file" in r.stderr


def test_the_shipped_suite_names_every_fault_once():
    suite, _ = load_suite(SHIPPED)
    story = sorted(p.stem for p in (ROOT / "fixtures/targets/minichain/faults").glob("*.patch"))
    more = sorted("more/" + p.stem for p in (ROOT / "fixtures/targets/minichain/faults/more").glob("*.patch"))
    assert [s.faults for s in suite.scenarios] == [[f] for f in story + more]
