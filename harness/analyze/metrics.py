"""Metrics from per-step lines: verl `step:N - key:value - …`, HF-trainer `{'loss': …}` dicts,
Megatron `key: value |` lines. Pure."""

from __future__ import annotations

import re

# key, then `:` or `=` (and an optional quote), then a number, nan or inf, maybe in np.float64(…).
_PAIR = re.compile(
    r"""['"]?(?P<key>[A-Za-z_][\w/@.\- ]*?)['"]?\s*[:=]\s*(?:np\.float\d+\(|tensor\()?"""
    r"""(?P<val>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|nan|NaN|inf|Inf|Infinity))(?![\w.])""")
_STEP = re.compile(r"\b(?:step|iteration|global_step)\s*[:=]?\s*(\d+)")


def parse_metrics(text: str, keys: dict[str, re.Pattern]) -> dict[str, float]:
    """Canonical metrics of one line (`loss`, `grad_norm`, `score_mean`, …) plus `step`."""
    out: dict[str, float] = {}
    m = _STEP.search(text)
    if m:
        out["step"] = float(m.group(1))
    for pm in _PAIR.finditer(text):
        raw = pm.group("key").strip()
        for name, rx in keys.items():
            if name not in out and rx.fullmatch(raw):
                out[name] = float(pm.group("val"))
    return out
