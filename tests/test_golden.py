"""The recorded-style logs in fixtures/logs/ against (a) their golden verdicts and (b) the
hand-written expectations of their author.

(a) catches any change in what the analyzer says; when the change is intended, run
    `python scripts/regen_golden.py` and review the diff of the *.verdict.json files.
(b) catches a wrong golden: outcome, failed stage, root-cause category and text must be what
    the log's author says they are (<name>.expect.yaml), whatever the golden says.
"""

from __future__ import annotations

import functools
import json
import importlib.util
from pathlib import Path

import pytest
import yaml

from harness.chain import STAGES
from corpus_eval import SHARED

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("regen_golden", ROOT / "scripts" / "regen_golden.py")
regen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen)

LOGS = regen.logs()
IDS = [p.stem for p in LOGS]
EXPECT_KEYS = {"outcome", "failed_stage", "category", "root_cause_contains", "count"}


@functools.lru_cache(maxsize=None)
def verdict(log: Path) -> dict:
    return regen.verdict_of(log)


def test_there_are_logs_and_each_has_a_golden_and_an_expectation():
    assert len(LOGS) >= 14, f"expected the fixture logs in {regen.LOGS}"
    missing = [p.name for p in LOGS if not regen.golden_path(p).exists() or not regen.expect_path(p).exists()]
    assert not missing, f"logs without a .verdict.json or .expect.yaml: {missing} (goldens: python scripts/regen_golden.py)"
    orphans = [p.name for p in regen.LOGS.glob("*.verdict.json") if not p.with_name(p.name[:-13] + ".log").exists()]
    assert not orphans, f"goldens without a log: {orphans}"


@pytest.mark.parametrize("log", LOGS, ids=IDS)
def test_verdict_equals_golden(log: Path):
    golden = regen.golden_path(log)
    old = golden.read_text(encoding="utf-8") if golden.exists() else ""
    new = regen.render(verdict(log))
    if old != new:
        pytest.fail(f"{golden.name} differs from what the analyzer says now.\n"
                    f"If the change is intended, run `python scripts/regen_golden.py` and review the diff.\n\n"
                    + regen.diff(old, new, golden.name), pytrace=False)


def _summary(v: dict) -> str:
    rc = v["root_cause"]
    head = f"outcome={v['outcome']} failed_stage={v['failed_stage']} last_stage_passed={v['last_stage_passed']}"
    if rc:
        head += f"\nroot cause (line {rc['line_no']}, {rc['category']}, x{rc['count']}, {rc['signature']}): {rc['text']}"
    return head + f"\nplaybook={v['playbook']}"


@pytest.mark.parametrize("log", LOGS, ids=IDS)
def test_verdict_matches_authors_expectation(log: Path):
    exp = yaml.safe_load(regen.expect_path(log).read_text(encoding="utf-8"))
    assert set(exp) <= EXPECT_KEYS, f"unknown keys in {regen.expect_path(log).name}: {set(exp) - EXPECT_KEYS}"
    v = verdict(log)
    rc = v["root_cause"]
    got = {
        "outcome": v["outcome"],
        "failed_stage": STAGES[v["failed_stage"] - 1] if v["failed_stage"] else None,
        "category": rc["category"] if rc else None,
    }
    want = {k: exp[k] for k in got}
    problems = [f"{k}: expected {want[k]!r}, analyzer says {got[k]!r}" for k in got if got[k] != want[k]]
    needle = exp["root_cause_contains"]
    if needle is None and rc is not None:
        problems.append("root cause: expected none")
    if needle is not None and (rc is None or needle not in rc["text"]):
        problems.append(f"root cause text should contain {needle!r}")
    if "count" in exp and (rc is None or rc["count"] != exp["count"]):
        problems.append(f"root cause count: expected {exp['count']}, analyzer says {rc and rc['count']}")
    assert not problems, "\n".join(problems) + "\n\n" + _summary(v)


ALL_LOGS = sorted((ROOT / "fixtures" / "logs").glob("*.log")) + sorted((SHARED / "corpus").glob("*/*.log"))


@pytest.mark.parametrize("log", ALL_LOGS, ids=lambda p: p.name)
def test_fast_scan_gives_the_same_verdict_as_reading_every_line(log):
    """The gate skips lines that hold no pattern's literal; skipping must never change a verdict."""
    from harness.analyze import Analyzer, detect_playbook
    from harness.playbook import load_playbook

    data = log.read_bytes()
    pb = load_playbook(detect_playbook(data[:256 * 1024]))
    verdicts = []
    for fast in (True, False):
        a = Analyzer(pb, fast=fast)
        a.feed(data)
        a.finish()
        verdicts.append(json.dumps(a.verdict(), sort_keys=True))  # NaN metrics compare equal as text
    assert verdicts[0] == verdicts[1]
