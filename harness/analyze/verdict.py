"""The verdict: how far the chain got, what broke and why, as the public JSON shape."""

from __future__ import annotations

import math

from ..chain import STAGE_NO, STAGES, stage_statuses
from ..redact import redact
from .findings import ROLE_ORDER, Finding


def root_cause(findings: list[Finding], last_update_no: int | None) -> Finding | None:
    """The earliest real error: a cause before a consequence before a wrapper. Errors that the
    run lived through (a healthy actor update came after them) do not count, nor do
    consequences and wrappers after it (an engine 'died' at shutdown). A run that crashed or
    hung has that for its root cause; bad values it printed before are findings (a wrong result
    is a run that went on, or ended, with them)."""
    live = [f for f in findings if f.outcome == "wrong_result" or last_update_no is None
            or (f.line_no > last_update_no and f.role == "cause")]
    failed = [f for f in live if f.outcome != "wrong_result"]
    # on one line, the most upstream stage first: a NaN reward makes the loss NaN, not the reverse
    return min(failed or live, key=lambda f: (ROLE_ORDER[f.role], f.line_no, f.stage or 0), default=None)


def lifecycle_stage(stage: int | None, top: int) -> int:
    """The failed stage: the one a signature or the call path says, else the stage after the
    last one passed — a failure before any marker is a start-up failure (DESIGN.md's convention),
    one after a whole step is the next step's first, completion (weight sync, generation). No
    bound from the markers' order: tasks are dispatched before the engine serves their first
    completion, so a completion failure after a dispatch marker is still a completion failure."""
    if stage is not None:
        return stage
    return top + 1 if top < len(STAGES) else STAGE_NO["completion"]


def build_verdict(an, now: float | None) -> dict:
    findings = sorted(an.findings.values(), key=lambda f: f.line_no)
    healthy_update = an.last_healthy_update
    root = root_cause(findings, healthy_update)
    top = max(an.reached, default=0)
    failed: int | None = None
    if root is not None:
        outcome = root.outcome
        failed = lifecycle_stage(root.stage, top)
        lsp = top if outcome == "wrong_result" else min(top, failed - 1)
    elif healthy_update is not None:
        outcome, lsp = "pass", top
    else:
        lsp = top
        timeout = an.pb.timeouts.get(top + 1)
        if now is not None and an.last_ts is not None and timeout and now - an.last_ts > timeout:
            outcome, failed = "hang", min(top + 1, len(STAGES))
        elif an.line_no == 0:
            outcome = "unknown"
        else:
            outcome = "running"
    statuses = stage_statuses(set(an.reached), failed)
    stages = []
    for no, name in enumerate(STAGES, 1):
        line_no, evidence = an.reached.get(no, (None, None))
        if no == failed and root is not None:
            line_no, evidence = root.line_no, root.text
        stages.append({"name": name, "status": statuses[no], "line_no": line_no,
                       "evidence": redact(evidence) if evidence else None})
    rc = None
    if root is not None:
        rc = root.to_dict() | {"stage": STAGES[failed - 1] if failed else None}
    return {
        "outcome": outcome,
        "last_stage_passed": lsp,
        "failed_stage": failed,
        "stages": stages,
        "root_cause": rc,
        "findings": [f.to_dict() for f in findings[:20]],
        "metrics": _metrics_summary(an.metrics),
        "warnings": [{"line_no": w[0], "text": redact(w[1]), "count": w[2]} for w in list(an.warnings.values())[:20]],
        "lines": an.line_no,
    }


def _metrics_summary(rows: list[dict]) -> dict:
    if not rows:
        return {"steps": 0, "last": {}}
    names = sorted({k for r in rows for k in r if k != "step"})
    series = {k: [r[k] for r in rows if k in r] for k in names}
    return {"steps": len(rows), "last": {k: v[-1] for k, v in series.items()},
            "first": {k: v[0] for k, v in series.items()}}


def jsonable(x):
    """The verdict as strict JSON allows it: NaN and infinities become the strings "nan", "inf"."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [jsonable(v) for v in x]
    return x
