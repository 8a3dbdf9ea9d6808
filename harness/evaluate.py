"""`harness eval`: the loop as a benchmark. A suite is a list of fault scenarios, each a fresh
copy of minichain with patches applied, a budget and the session end that counts as solved;
each runs as a real session (local transport, real processes, the model over real HTTP), one
row per scenario, then the totals a team compares models by.

    scenarios:                              # harness/eval_suite.yaml is the shipped suite
      - {name: reward-parse, faults: [06-reward-split-per-character]}
      - {name: two-at-once, faults: [04-speculative-config-without-mtp, 01-final-layernorms-mapping],
         budgets: {relaunches: 4}, solved: passed}

Fault names are patch files of fixtures/targets/minichain/faults/ (`more/11-…` for ours), or
paths to patches of your own (relative to the suite file), applied with `git apply` in order.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .errors import BadInput
from .yamlfile import load_model

SHIPPED = Path(__file__).with_name("eval_suite.yaml")
DEFAULT_BUDGETS = {"relaunches": 6, "wall_clock": "10m", "agent_steps": 80, "stuck_after": 3}


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    faults: list[str] = Field(min_length=1)
    budgets: dict = {}
    solved: str = "passed"  # the session end reason that counts as solved


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid")
    budgets: dict = {}  # for every scenario, under its own
    scenarios: list[Scenario] = Field(min_length=1)


def load_suite(path: Path | None) -> tuple[Suite, Path]:
    """The suite and the directory its relative patch paths start from."""
    path = SHIPPED if path is None else path
    if not path.is_file():
        raise BadInput(f"{path}: no such suite file; give a YAML file with `scenarios:` (see harness eval --help)")
    return load_model(path, Suite, "suite (scenarios: [{name, faults, budgets?, solved?}])"), path.parent


def patch_path(fault: str, base: Path) -> Path:
    from .demo import TARGET

    for p in (TARGET / "faults" / f"{fault}.patch", base / fault):
        if p.is_file():
            return p
    raise BadInput(f"fault {fault!r}: no patch {fault}.patch in {TARGET / 'faults'} nor a file {base / fault}")


async def run_scenario(sc: Scenario, suite: Suite, base: Path, dest: Path, model: dict, session: str) -> dict:
    """One scenario as a session named `session` (unique: a run's id, and so which processes its
    stop sweeps, comes from it — two scenarios at once must not share one); its row."""
    from .demo import prepare, spec_dict
    from .session.runner import run_spec
    from .spec import RunSpec

    patches = [patch_path(f, base) for f in sc.faults]
    try:
        work = prepare(dest, patches)
    except BadInput as e:
        raise BadInput(f"scenario {sc.name}: {e}") from None
    d = spec_dict(work, model["base_url"], model["name"], model["key_env"])
    d["budgets"] = DEFAULT_BUDGETS | suite.budgets | sc.budgets
    t0 = time.monotonic()
    ses = await run_spec(RunSpec.model_validate(d), dest / session)
    st, end = ses.state, ses.state.ended or {}
    return {"scenario": sc.name, "solved": end.get("reason") == sc.solved, "end": end.get("reason"),
            "detail": end.get("detail", ""), "attempts": len(st.attempts), "model_calls": st.model_calls,
            "tokens": st.tokens, "money": round(st.money, 6), "seconds": round(time.monotonic() - t0, 1)}


async def run_suite(suite: Suite, base: Path, model: dict, *, jobs: int = 1, keep: Path | None = None,
                    on_row=None) -> list[dict]:
    """Every scenario (at most `jobs` at once); rows in the suite's order."""
    gate = asyncio.Semaphore(max(1, jobs))
    stamp = time.strftime("%Y%m%d%H%M%S")
    root = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="harness-eval-"))

    async def one(i: int, sc: Scenario) -> dict:
        async with gate:
            dest = root / f"{i:02d}-{sc.name.replace('/', '-')}"
            dest.mkdir(parents=True, exist_ok=True)
            row = await run_scenario(sc, suite, base, dest, model, f"eval-{os.getpid()}-{stamp}-{i:02d}")
        if on_row:
            on_row(row)
        return row
    try:
        return list(await asyncio.gather(*(one(i, sc) for i, sc in enumerate(suite.scenarios, 1))))
    finally:
        if keep is None:
            import shutil

            shutil.rmtree(root, ignore_errors=True)


def totals(rows: list[dict]) -> dict:
    solved = [r for r in rows if r["solved"]]
    return {"scenarios": len(rows), "solved": len(solved), "solve_rate": round(len(solved) / len(rows), 3) if rows else 0.0,
            "median_attempts": statistics.median(r["attempts"] for r in rows) if rows else 0,
            "tokens_per_solved": round(sum(r["tokens"] for r in rows) / len(solved)) if solved else None,
            "money": round(sum(r["money"] for r in rows), 6), "seconds": round(sum(r["seconds"] for r in rows), 1)}
