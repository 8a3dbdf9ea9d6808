"""Regenerate the golden verdicts of the recorded-style logs in fixtures/logs/.

    python scripts/regen_golden.py           # rewrite fixtures/logs/<name>.verdict.json
    python scripts/regen_golden.py --check   # exit 1 with a unified diff if any golden is stale

For every fixtures/logs/*.log the analyzer runs with the default playbook detection and no
clock (`now=None`), so a golden never depends on when or where it was made. The golden is
the verdict as `harness analyze --json --digest` shows it (non-finite numbers as strings),
with `file` relative to the repo root and the digest split into a list of lines. Review the diff before committing it: a golden is
only as right as the analyzer that wrote it; `<name>.expect.yaml` (hand-written) is the
ground truth that tests/test_golden.py holds both against.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "fixtures" / "logs"


def logs() -> list[Path]:
    return sorted(LOGS.glob("*.log"))


def golden_path(log: Path) -> Path:
    return log.with_name(log.stem + ".verdict.json")


def expect_path(log: Path) -> Path:
    return log.with_name(log.stem + ".expect.yaml")


def verdict_of(log: Path) -> dict:
    """The verdict of one log as the golden stores it."""
    from harness.analyze import analyze_file, build_digest
    from harness.analyze.verdict import jsonable

    verdict, an = analyze_file(log, now=None)
    verdict["file"] = log.resolve().relative_to(ROOT).as_posix()
    # the digest (what a model reads) as a list of lines, so that its diffs are reviewable
    verdict["digest"] = build_digest(verdict, an).split("\n")
    return jsonable(verdict)


def render(verdict: dict) -> str:
    return json.dumps(verdict, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def diff(old: str, new: str, name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"{name} (golden)", tofile=f"{name} (analyzer now)"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 with a diff if a golden is stale")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    stale = 0
    found = logs()
    if not found:
        print(f"regen_golden: no *.log in {LOGS}", file=sys.stderr)
        return 1
    for log in found:
        new = render(verdict_of(log))
        path = golden_path(log)
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if old == new:
            continue
        stale += 1
        rel = path.relative_to(ROOT).as_posix()
        if args.check:
            sys.stdout.write(diff(old, new, rel) or f"{rel}: missing\n")
        else:
            path.write_text(new, encoding="utf-8")
            print(f"wrote {rel}")
    orphans = [p for p in LOGS.glob("*.verdict.json") if not p.with_name(p.name.replace(".verdict.json", ".log")).exists()]
    for p in orphans:
        print(f"{p.relative_to(ROOT).as_posix()}: golden without a log (delete it)", file=sys.stderr)
    if args.check and (stale or orphans):
        print(f"\n{stale} golden(s) differ from the analyzer. Run `python scripts/regen_golden.py` and review the diff.",
              file=sys.stderr)
        return 1
    if not args.check:
        print(f"{len(found)} logs, {stale} golden(s) rewritten")
    return 1 if orphans else 0


if __name__ == "__main__":
    sys.exit(main())
