"""The chain of stages an RL post-training run goes through, and the vocabulary of verdicts.

These names are a public contract (see DESIGN.md and README: `harness analyze --json`).
"""

from __future__ import annotations

STAGES: tuple[str, ...] = (
    "engine_start",
    "completion",
    "task_dispatch",
    "trajectory",
    "reward",
    "training_data",
    "actor_update",
)
STAGE_NO: dict[str, int] = {name: i + 1 for i, name in enumerate(STAGES)}

OUTCOMES: tuple[str, ...] = ("pass", "crash", "hang", "wrong_result", "running", "unknown")

CATEGORIES: tuple[str, ...] = (
    "config_mismatch",
    "weight_mapping",
    "precision_dtype",
    "length_limit",
    "oom",
    "network_proxy",
    "distributed_comm_hang",
    "version_incompat",
    "data_format",
    "reward_parsing",
    "device_runtime_error",
    "timeout",
    "other",
)

CLASSES: tuple[str, ...] = ("infra", "code")

# Stage statuses in the verdict.
PASSED, IMPLIED, FAILED, NOT_REACHED = "passed", "implied", "failed", "not_reached"


def stage_statuses(reached: set[int], failed_stage: int | None) -> dict[int, str]:
    """Status of every stage from the stages whose markers were seen and the failed one.

    A later stage's marker implies that the earlier ones passed.
    """
    top = max(reached, default=0)
    out: dict[int, str] = {}
    for no in range(1, len(STAGES) + 1):
        if no == failed_stage:
            out[no] = FAILED
        elif no in reached:
            out[no] = PASSED
        elif no < top:
            out[no] = IMPLIED
        else:
            out[no] = NOT_REACHED
    return out


def chain_marks(statuses: dict[int, str]) -> str:
    """One character per stage: ✓ passed, · implied, ✗ failed, - not reached (phone-width)."""
    sym = {PASSED: "✓", IMPLIED: "·", FAILED: "✗", NOT_REACHED: "-"}
    return "".join(sym[statuses[no]] for no in sorted(statuses))
