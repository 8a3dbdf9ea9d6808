"""Score the analyzer on the labelled real-world corpus in ../shared/corpus/realworld*.

Run `python tests/corpus_eval.py` for the table the README quotes; tests/test_corpus.py holds
the floors. Scoring, per case (no file is special-cased anywhere):
- failed_stage: equal to the label (null equals null);
- category: root_cause.category equal to the label (a pass has no root cause: counts when the
  label is `other`);
- in digest: the labelled root-cause line appears in the digest (whitespace-normalised);
- chosen: it appears in root_cause.text — for a pass, in the evidence of the last passed stage.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("HARNESS_SHARED", ROOT.parent / "shared"))
CORPORA = ("realworld", "realworld2")


def cases() -> list[dict]:
    out = []
    for name in CORPORA:
        d = SHARED / "corpus" / name
        if (d / "cases.yaml").is_file():
            for c in yaml.safe_load((d / "cases.yaml").read_text()):
                out.append(c | {"path": d / c["file"], "corpus": name})
    return out


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def score(case: dict, verdict: dict) -> dict:
    label = _norm(str(case["root_cause_line"]))
    rc = verdict["root_cause"]
    if rc:
        chosen = rc["text"]
    else:
        passed = [s for s in verdict["stages"] if s["status"] == "passed"]
        chosen = passed[-1]["evidence"] if passed else ""
    category = rc["category"] if rc else ("other" if verdict["outcome"] == "pass" else None)
    return {
        "stage": verdict["failed_stage"] == case["failed_stage"],
        "category": category == case["category"],
        "digest": label in _norm(verdict.get("digest", "")),
        "chosen": label in _norm(chosen or ""),
        "outcome": verdict["outcome"] == case["outcome"],
    }


def evaluate() -> list[tuple[dict, dict, dict]]:
    from harness.analyze import analyze_file, build_digest

    rows = []
    for case in cases():
        verdict, an = analyze_file(case["path"])
        verdict["digest"] = build_digest(verdict, an)
        rows.append((case, verdict, score(case, verdict)))
    return rows


def shares(rows) -> dict[str, float]:
    keys = ("stage", "category", "digest", "chosen", "outcome")
    return {k: sum(r[2][k] for r in rows) / len(rows) for k in keys} if rows else {}


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    rows = evaluate()
    for case, v, s in rows:
        bad = [k for k, ok in s.items() if not ok]
        rc = v["root_cause"] or {}
        print(f"{case['id']:>4} {'ok ' if not bad else 'BAD'} {','.join(bad):<28} "
              f"stage {v['failed_stage']}/{case['failed_stage']} cat {rc.get('category')}/{case['category']} "
              f"out {v['outcome']}/{case['outcome']} | {(rc.get('text') or '')[:70]}")
    print({k: f"{x:.0%}" for k, x in shares(rows).items()}, f"over {len(rows)} cases")
