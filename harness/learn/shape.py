"""The shape of one attempt's change, read from the ledger's two snapshots: one YAML key set, one
exact text replacement, or something else (a code change a declared fix cannot express).

    fix, why = declared_fix({"config.yaml": (before, after)})
    fix  -> {"kind": "set_yaml", "file": "config.yaml", "key": "rollout.token_margin", "value": "16384"}
    ok, why = reproduces(fix, {"config.yaml": (before, after)})   # applied to `before`, gives `after`

An environment change is not here: the agent changes files, and the launch env changes only
through declared fixes, which are already playbook entries.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from ..agent.fixes import edit_text
from ..yamledit import same

Change = dict[str, tuple[str | None, str | None]]  # path -> (text before, text after); None: absent

MAX_SPAN = 30  # lines: a replacement spanning more is a code change to describe, not to declare
_YAML = (".yaml", ".yml")


def declared_fix(change: Change) -> tuple[dict | None, str]:
    """(the declared fix that makes this change, "") or (None, why the change has no such shape)."""
    if len(change) != 1:
        return None, f"{len(change)} files changed: not one declared fix" if change else "nothing changed"
    path, (before, after) = next(iter(change.items()))
    if before is None or after is None:
        return None, f"{path} was {'added' if before is None else 'removed'}: not a declared fix"
    if before == after:
        return None, f"{path} did not change"
    if path.endswith(_YAML):
        fix = _yaml_key(path, before, after)
        if fix:
            return fix, ""
    return _replacement(path, before, after)


def reproduces(fix: dict, change: Change) -> tuple[bool, str]:
    """Whether applying `fix` to the text before gives the change's text after (for a YAML key:
    the same data), and if not, why."""
    path = fix.get("file", "")
    if path not in change:
        return False, f"the fix edits {path}, which the change did not touch"
    before, after = change[path]
    out, description = edit_text(fix, before or "", path)
    if out is None:
        return False, description
    if out == after or (fix["kind"] == "set_yaml" and same(_load(out), _load(after))):
        return True, description
    return False, f"applying it gives another text than the ledger's ({description})"


# ---------------------------------------------------------------- the shapes

def _yaml_key(path: str, before: str, after: str) -> dict | None:
    """set_yaml when exactly one scalar key differs (changed or added) and nothing else does."""
    a, b = _load(before), _load(after)
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None
    fa, fb = _flatten(a), _flatten(b)
    if set(fa) - set(fb):
        return None  # a key was removed
    diff = [k for k in fb if fa.get(k, _ABSENT) != fb[k]]
    if len(diff) != 1 or isinstance(fb[diff[0]], (dict, list)):
        return None
    key = diff[0]
    return {"kind": "set_yaml", "file": path, "key": key, "value": _scalar_text(fb[key])}


def _replacement(path: str, before: str, after: str) -> tuple[dict | None, str]:
    """One exact replacement: the changed lines with enough context around them that the old
    text occurs exactly once in the file."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    if max(len(a) - head - tail, len(b) - head - tail) > MAX_SPAN:
        return None, f"{path}: {max(len(a), len(b)) - head - tail} lines changed: a code change to describe, " \
                     "not one replacement"
    lo, hi = head, tail  # widen by whole lines until the old text is there once and not empty
    while True:
        old, new = "".join(a[lo:len(a) - hi]), "".join(b[lo:len(b) - hi])
        if old and before.count(old) == 1:
            return {"kind": "replace", "file": path, "old": old, "new": new}, ""
        if lo == 0 and hi == 0:
            return None, f"{path}: the changed text is not unique in the file"
        lo, hi = max(0, lo - 1), max(0, hi - 1)


_ABSENT = object()


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out |= _flatten(v, key + ".")
        else:
            out[key] = v
    return out


def _load(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _scalar_text(v: Any) -> str:
    """A loaded scalar as the YAML text that loads back as it (True -> 'true', None -> 'null')."""
    if v is None or isinstance(v, (bool, int, float)):
        return json.dumps(v)
    text = str(v)
    return text if yaml.safe_load(text) == text else json.dumps(text)
