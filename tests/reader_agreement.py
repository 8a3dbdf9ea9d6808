"""How far a second reader who has only the log agrees with the corpus labels, which were made
with the issue thread in view (its title, the replies, the fix) — the most a log-only analyzer
can be expected to score — beside the analyzer's agreement with each of them.

    python tests/reader_agreement.py

The second reader's labels are in tests/corpus/reader/*.yaml, one entry per case (corpus, id,
failed_stage, outcome, category, root_cause_line), written blind: each log under an anonymous
name, no thread, no label, no analyzer output in view. Printed per group (the development
cases, the held-out ones): only shares, never a case.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_eval as ce  # noqa: E402

READER = ce.ROOT / "tests" / "corpus" / "reader"
FIELDS = {"stage": "failed_stage", "category": "category", "outcome": "outcome"}


def readings() -> dict[tuple[str, int], dict]:
    out = {}
    for f in sorted(READER.glob("*.yaml")):
        for r in yaml.safe_load(f.read_text()) or []:
            out[(r["corpus"], int(r["id"]))] = r
    return out


def same_line(a: str, b: str) -> bool:
    """Two labels name the same line: equal as the analyzer reads them, or one a cut of the other
    (a label may keep part of a line that wraps)."""
    a, b = ce._bare(str(a)), ce._bare(str(b))
    return bool(a and b) and (a in b or b in a)


def agree(label: dict, other: dict) -> dict:
    out = {k: label[f] == other[f] for k, f in FIELDS.items()}
    out["chosen"] = same_line(label["root_cause_line"], other["root_cause_line"])
    return out


def share(rows: list[dict]) -> str:
    return ce._pct({k: sum(r[k] for r in rows) / len(rows) for k in ("stage", "category", "chosen", "outcome")})


def main() -> None:
    sys.path.insert(0, str(ce.ROOT))
    read = readings()
    picked = [c for c in ce.cases() if (c["corpus"], int(c["id"])) in read]
    if not picked:
        sys.exit(f"no second reader's labels in {READER}: nothing to compare")
    rows = ce.evaluate(picked)
    for group, held in (("development", False), ("held out", True)):
        mine = [(c, v, s) for c, v, s in rows if (c["corpus"] in ce.HELD_OUT) == held]
        if not mine:
            continue
        reader = [read[(c["corpus"], int(c["id"]))] for c, _, _ in mine]
        print(f"{group}: {len(mine)} cases")
        print(f"  reader   vs label   {share([agree(c, r) for (c, _, _), r in zip(mine, reader)])}")
        print(f"  analyzer vs label   {share([s for _, _, s in mine])}")
        print(f"  analyzer vs reader  {share([ce.score(c | r, v) for (c, v, _), r in zip(mine, reader)])}")


if __name__ == "__main__":
    main()
