"""Metrics from per-step lines: verl `step:N - key:value - …`, HF-trainer `{'loss': …}` dicts,
Megatron `key: value |` lines, wandb's run summary rows. Pure."""

from __future__ import annotations

import re

# key, then `:` or `=` (and an optional quote), then a number, nan or inf, maybe in np.float64(…) or quoted:
# the DPO reference implementation formats each float of its stats as a string before printing them
# (`formatted_dict`: f"{v:.5g}", copied by the trainers built from it: `{'loss/train': 'nan', …}`;
# tests/corpus/realworld41/4103).
_PAIR = re.compile(
    r"""['"]?(?P<key>[A-Za-z_][\w/@.\- ]*?)['"]?\s*[:=]\s*(?:np\.float\d+\(|tensor\(|(?P<q>['"]))?"""
    r"""(?P<val>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|nan|NaN|inf|Inf|Infinity))(?(q)(?P=q))(?![\w.])""")
_STEP = re.compile(r"\b(?:step|iteration|global_step)\s*[:=]?\s*(\d+)")
# a row of wandb's run summary, printed as a run ends (`wandb: Run summary:`, then `wandb:  key value`
# per metric, the keys right-aligned; the run history's rows hold sparklines, not numbers)
WANDB_ROW = re.compile(r"^wandb:\s+(?P<key>[A-Za-z_][\w/@.\-]*)\s+"
                       r"(?P<val>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|NaN|inf|Infinity))$")


# A line of a shape no playbook names that reports training metrics: a key ending in loss, reward or
# grad_norm with a number (OpenRLHF's tqdm postfix `policy_loss=0.01, kl=…`, slime's `rollout N: {…}`,
# a trainer's own `step 3 | loss=nan | …`). It counts when it holds at least GENERIC_PAIRS pairs; the
# analyzer reads one when it holds a non-finite value (GENERIC_WORDS: the gate lets those through).
_GENERIC_KEY = r"""['"]?(?:[\w.]+/)*\w*(?:loss|reward|grad_norm)['"]?\s*[:=]\s*"""  # a key of that family, its separator
GENERIC = re.compile(r"""(?:^|[\s,{|(\[])""" + _GENERIC_KEY +
                     r"""(?:np\.float\d+\(|tensor\(|['"])?[-+]?(?:\d|\.\d|nan|NaN|inf|Inf)""")
GENERIC_PAIRS = 3
# the gate's literals for them: NaN, and an infinity as a value (`: inf`, `=-inf`, JSON's Infinity)
GENERIC_WORDS = ("nan", "NaN", ": inf", "=inf", ": -inf", "=-inf", ": Inf", "Infinity")
# A key of such a line that no playbook names is read by its last word: the first `…loss` of a line
# is its loss (DeepSpeed-Chat's `act_loss: …|cri_loss: …`, OpenRLHF's `policy_loss=…`, slime's
# `train/pg_loss`), the first `…reward` or `…score` its reward, a `…grad_norm` its grad norm.
GENERIC_KEYS = {"loss": re.compile(r"(?:[\w.]+/)*\w*loss"), "reward_mean": re.compile(r"(?:[\w.]+/)*\w*(?:reward|score)"),
                "grad_norm": re.compile(r"(?:[\w.]+/)*\w*grad_norm")}


# A dict of metrics that Python's pprint spread over lines (wider than its 80 columns: one item per
# line, the continuation lines indented by a space): its first line opens it, each item line
# continues it, a line ending in `}` closes it. Read as the one line it stands for.
DICT_OPEN = re.compile(r"""^\{['"][\w/@.\- ]+['"]: [-+]?(?:\d|\.\d|nan|inf)[^{}]*,$""")
DICT_ITEM = re.compile(r"""^ ?['"][^'"]+['"]: [^{}]*(?:,|\})$""")
DICT_LINES = 200  # a dict longer than this is no step's metrics: read what was gathered


# `name value` items between commas, the way a loop without a logger words its report — mlx-lm's
# trainers (`Iter 50: Train loss 0.045, Chosen reward -0.169, …, It/sec 0.678`), nanoGPT's and the
# loops written after it (`iter 1: loss 0.0000 (main 0.0000, critic 0.0000), time 103634.20ms`):
# tests/corpus/realworld50/5016, realworld51/5117 and 5125. A report's shape, not its values' keys.
_SPACED = re.compile(r"(?:^|[,:(]) *[A-Za-z][\w/.-]*(?: [A-Za-z][\w/.-]*)* [-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|nan|inf)"
                     r"(?:%|[a-z]{1,2})?(?=[,)]|\s*$| \()")


# Where a line was printed from, `file.ext:lineno`, is no value it reports: Python's warnings
# (warnings.formatwarning: `…/areal/utils/fsdp.py:50: UserWarning: …`, tests/corpus/realworld65/6501),
# transformers' logging (`[INFO|modeling_utils.py:2513] 2023-06-08 …`, realworld67/6701), glog and
# Ray's C++ logs (`node_manager.cc:2929:`), a file's name then its function (`worker.py:run:88`).
SOURCE_AT = re.compile(r"[\w.-]+\.(?:py|pyx|cc|cpp|cxx|c|h|hpp|cu|rs|go|java|js|ts)(?::\w+)?:\d+\b")


def measures(text: str) -> bool:
    """Whether a line holds a `key: number` pair: it reports a value, not the work under way."""
    text = SOURCE_AT.sub(" ", text)
    return _PAIR.search(text) is not None or len(_SPACED.findall(text)) >= GENERIC_PAIRS


def reports(text: str) -> bool:
    """Whether a line holds at least GENERIC_PAIRS `key: number` pairs (or `name value` items): a
    report of metrics."""
    return len(_PAIR.findall(text)) >= GENERIC_PAIRS or len(_SPACED.findall(text)) >= GENERIC_PAIRS


# A line that is one such key and a value that is not finite — a summary printed a metric a line
# (`actor/pg_loss: NaN`, a W&B run's summary copied key by key: tests/corpus/realworld51/5124), a
# loop's `print(f"loss: {loss}")`: the program says the value is not a number, whatever else it reports.
LONE_NONFINITE = re.compile("^" + _GENERIC_KEY + r"(?:nan|NaN|NAN|[-+]?(?:inf|Inf|Infinity))$")


def generic_metrics(text: str, keys: dict[str, re.Pattern]) -> dict[str, float]:
    """`parse_metrics` of a line of that shape (empty if it is not one)."""
    if GENERIC.search(text) is None or not (reports(text) or LONE_NONFINITE.match(text.strip())):
        return {}
    return parse_metrics(text, GENERIC_KEYS) | parse_metrics(text, keys)  # a playbook's key over a last word


def parse_metrics(text: str, keys: dict[str, re.Pattern]) -> dict[str, float]:
    """Canonical metrics of one line (`loss`, `grad_norm`, `score_mean`, …) plus `step`."""
    out: dict[str, float] = {}
    m = _STEP.search(text)
    if m:
        out["step"] = float(m.group(1))
    row = WANDB_ROW.match(text) if text.startswith("wandb:") else None
    for pm in [row] if row else _PAIR.finditer(text):
        raw = pm.group("key").strip()
        for name, rx in keys.items():
            if name not in out and rx.fullmatch(raw):
                out[name] = float(pm.group("val"))
    return out


HISTORY = 64  # values of each metric kept for the rules that compare a value with earlier ones


def _finite(x: float) -> bool:
    return x == x and x not in (float("inf"), float("-inf"))


def violates(rule, values: dict[str, float], earlier) -> bool:
    """Whether this step's value of `rule.metric` breaks the rule (see MetricRule), judged
    against the same line's `against` metric or the metric's earlier finite values."""
    value = values[rule.metric]
    if any(not _finite(values[m]) for m in rule.while_finite if m in values):
        return False
    if rule.when == "nonfinite":
        return not _finite(value)
    if rule.when == "zero":
        return value == 0
    if rule.when == "same":
        return rule.against in values and values[rule.against] == value
    if rule.when == "above":
        return _finite(value) and value > rule.limit
    if rule.when == "below":
        return _finite(value) and value < rule.limit
    past = [x for x in list(earlier)[-rule.window:] if _finite(x)]
    if not _finite(value):
        return False  # the nonfinite rule's to say
    if rule.when == "drift":
        if len(past) < 5:
            return False
        mean = sum(past) / len(past)
        sd = (sum((x - mean) ** 2 for x in past) / len(past)) ** 0.5
        return sd > 0 and value > mean + 3 * sd
    if len(past) < 3:
        return False
    median = sorted(past)[len(past) // 2]
    if rule.when == "explode":
        return median > 0 and value > 10 * median
    return median > 0 and value < median / 10  # collapse
