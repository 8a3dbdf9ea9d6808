"""From a session's journal and its ledger's changes to validated playbook entries.

An attempt whose change moved the chain forward — its failure's fingerprint gone for the rest of
the session, and the next attempt got at least as far — gives one proposal: a signature of its
root-cause line (generalised), its category, stage and class, a hint written from the change and,
when the change has the shape of a declared fix, that fix. A failure found by a metric rule has no
line to match: its proposal is the rule again with the learned hint. Each proposal is validated
before it is offered (`validate`); one that fails says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..chain import STAGES
from ..errors import HarnessError
from ..playbook import MetricRule, Playbook, PlaybookFile, Signature, compile_playbook, merge
from ..redact import redact
from ..session.state import fold
from .shape import Change, declared_fix, reproduces
from .signature import generalise

HINT_DIFF_LINES = 60  # of the change's diff kept in a hint (the model reads hints in the digest)


@dataclass
class Step:
    """A failed attempt and what happened before the next one."""

    attempt: int
    next: int  # the attempt after it
    verdict: dict
    by: str  # agent | declared | cleanup | nothing
    summary: str = ""  # the agent's relaunch summary, or the declared fix's description
    advanced: bool = False  # the next attempt got further (not only as far)
    skip: str = ""  # why nothing is learned from it ("" when something is)


@dataclass
class Proposal:
    attempt: int
    session: str
    kind: str  # fix (a signature with a declared fix) | hint (the change described) | rule (a metric rule's
    # hint, and its fix when the change has that shape: the value has no line a signature could match)
    entry: dict  # a playbook signature (or metric rule) as written to the file
    advanced: bool = False
    problems: list[str] = field(default_factory=list)  # why validation failed; empty: offered

    @property
    def ok(self) -> bool:
        return not self.problems


def steps(events: list[dict]) -> list[Step]:
    """Each failed attempt with a next one, and whether (and how) its failure was dealt with."""
    st = fold(events)
    by_attempt: dict[int, list[dict]] = {}
    for e in events:
        by_attempt.setdefault(e.get("attempt"), []).append(e)
    out = []
    for i, (a, b) in enumerate(zip(st.attempts, st.attempts[1:])):
        v = a.verdict
        if not v or v["outcome"] == "pass" or a.cut_short:
            continue
        s = Step(a.n, b.n, v, *_what_happened(by_attempt.get(a.n, [])))
        again = [x.n for x in st.attempts[i + 1:] if x.verdict and x.verdict.get("fingerprint") == v.get("fingerprint")]
        if s.by == "declared":
            s.skip = f"fixed by a playbook's declared fix already ({s.summary})"
        elif s.by == "cleanup":
            s.skip = "an infrastructure failure, retried after the spec's cleanup: nothing to learn"
        elif s.by == "nothing":
            s.skip = "nothing was changed before the next attempt"
        elif not b.verdict or b.cut_short:
            s.skip = f"attempt {b.n} was cut short: whether the change worked is unknown"
        elif again:
            s.skip = f"the same failure came back in attempt {again[0]}"
        elif b.reached < a.reached:
            s.skip = f"attempt {b.n} got less far ({b.reached} stages against {a.reached})"
        s.advanced = bool(b.verdict) and b.reached > a.reached
        out.append(s)
    return out


def _what_happened(events: list[dict]) -> tuple[str, str]:
    for e in events:
        if e["type"] == "fix" and (e.get("applied") or e.get("already")):
            return "declared", f"{e.get('signature')}: {e.get('description', '')}"
        if e["type"] == "cleanup":
            return "cleanup", ""
    ends = [e for e in events if e["type"] == "tool" and e.get("end") == "relaunch" and not e.get("refused")]
    edits = [e for e in events if e["type"] == "tool" and not e.get("refused") and e.get("name") != "bash"]
    if ends or edits:
        return "agent", (ends[-1].get("summary") or "") if ends else ""
    return "nothing", ""


def propose(step: Step, change: Change, diff: str, pb: Playbook, session: str) -> Proposal:
    """The playbook entry learned from one step (validate it before offering it)."""
    root = step.verdict.get("root") or {}
    stage = STAGES[step.verdict["failed_stage"] - 1] if step.verdict.get("failed_stage") else None
    evidence = f"session {session} attempt {step.attempt}"
    fix, why = declared_fix(change)
    hint = _hint(step, change, diff, fix, why)
    rules = {r.id: r for r in pb.source.metric_rules}
    if root.get("signature") in rules:  # a value a metric rule caught: the rule, with what fixed it
        rule = rules[root["signature"]]
        entry = rule.model_dump(exclude_defaults=True) | {"hint": hint, "evidence": evidence}
        p = Proposal(step.attempt, session, "rule", entry, step.advanced)
        _add_fix(p, fix)
        return p
    sigs = {s.id: s for s in pb.source.signatures}
    known = sigs.get(root.get("signature") or "")
    regex = generalise(root.get("text") or "")
    entry = {"id": _entry_id(root, step.verdict), "regex": regex or "", "evidence": evidence,
             "note": f"refines {known.id} of {pb.origins.get(known.id, pb.name)}" if known else "",
             "category": root.get("category"), "class": root.get("class", "code"), "stage": stage,
             "outcome": step.verdict["outcome"],
             "priority": (known.priority + 1) if known else 1, "hint": hint}
    entry = {k: v for k, v in entry.items() if v not in ("", None)}
    problems = [] if regex else [f"the root-cause line has too few stable words to match it alone: "
                                 f"{(root.get('text') or '(none)')[:120]!r}"]
    p = Proposal(step.attempt, session, "fix" if fix else "hint", entry, step.advanced, problems)
    _add_fix(p, fix)
    return p


def _add_fix(p: Proposal, fix: dict | None) -> None:
    if fix is None:
        return
    if secret := [k for k in ("old", "new", "value") if k in fix and redact(fix[k]) != fix[k]]:
        p.problems.append(f"the change holds what looks like a secret ({', '.join(secret)}): not written")
    else:
        p.entry["fix"] = fix


def _entry_id(root: dict, verdict: dict) -> str:
    base = root.get("signature") or root.get("category") or "failure"
    return re.sub(r"[^A-Za-z0-9_]+", "_", f"learned_{base}_{(verdict.get('fingerprint') or '')[:6]}").strip("_")


def _hint(step: Step, change: Change, diff: str, fix: dict | None, why: str) -> str:
    head = "Fixed before by the agent" + (f": {step.summary}" if step.summary else "")
    files = ", ".join(sorted(change)) or "no file"
    if fix is not None:
        what = {"set_yaml": lambda: f"set {fix['key']} to {fix['value']} in {fix['file']}",
                "replace": lambda: f"one replacement in {fix['file']}, declared as this entry's fix"}[fix["kind"]]()
        return redact(f"{head} — {what}.")
    lines = diff.splitlines()
    shown = "\n".join(lines[:HINT_DIFF_LINES]) + (f"\n… {len(lines) - HINT_DIFF_LINES} more lines" if
                                                  len(lines) > HINT_DIFF_LINES else "")
    return redact(f"{head} — changed {files} ({why}); the change:\n{shown}")


# ---------------------------------------------------------------- validation

def validate(p: Proposal, *, log: Path, base: Playbook, change: Change, analyze) -> None:
    """Fill `p.problems`: the entry must be what the analyzer finds as the root cause on the log it
    came from, and its declared fix must reproduce the ledger's change on the snapshot before it.
    `analyze(path, playbook)` is the analyzer over a file. (Healthy logs: `healthy_hits`.)"""
    if p.problems:
        return
    learned = with_entries(base, [p])
    try:
        verdict, _ = analyze(log, learned)
    except (OSError, HarnessError) as e:
        p.problems.append(f"the attempt's log cannot be read: {e}")
        return
    got = (verdict.get("root_cause") or {}).get("signature")
    if got != p.entry["id"]:
        p.problems.append(f"on the log of attempt {p.attempt} the root cause is {got or 'none'}, not this entry")
    if "fix" in p.entry:
        ok, why = reproduces(p.entry["fix"], change)
        if not ok:
            p.problems.append(f"the declared fix does not reproduce the change: {why}")


def healthy_hits(proposals: list[Proposal], healthy: list[Path]) -> None:
    """A signature that matches a line of a healthy log is not offered: its first such line is
    added to its problems. Each log is read once for all the proposals."""
    left = [(p, re.compile(p.entry["regex"])) for p in proposals if p.kind != "rule"]
    for path in healthy:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for no, line in enumerate(fh, 1):
                if not left:
                    return
                for p, rx in [x for x in left if x[1].search(line)]:
                    p.problems.append(f"matches a healthy log: {path.name}:{no}: {line.rstrip(chr(10))[:100]!r}")
                    left.remove((p, rx))


def with_entries(base: Playbook, proposals: list[Proposal], name: str = "learned") -> Playbook:
    """The base playbook with the proposals' entries merged over it (later ids replace earlier)."""
    sigs = [Signature.model_validate(p.entry) for p in proposals if p.kind != "rule"]
    rules = [MetricRule.model_validate(p.entry) for p in proposals if p.kind == "rule"]
    top = PlaybookFile(name=name, signatures=sigs, metric_rules=rules)
    origins = base.origins | {p.entry["id"]: f"{name} (file), learned from {p.entry['evidence']}" for p in proposals}
    return compile_playbook(merge([base.source, top], base.name), origins)
