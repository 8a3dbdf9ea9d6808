"""`harness demo`: the whole loop on this machine, on minichain with all ten faults.

It copies fixtures/targets/minichain into a temporary workdir, applies every fault patch, and
runs a session with the local transport: the four configuration faults are fixed by the fixes
playbooks/minichain.yaml declares, the six code faults by a model — the scripted one of
harness/agent/demo_script.yaml served by a local OpenAI-compatible HTTP server (so the real
`openai` client and the HTTP path run), or a real endpoint when one is given.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from .engines import LocalRay, LocalSlurm
from .errors import BadInput
from .remote.launch import PROXY_VARS

# minichain ships as data of `harness.targets` (fixtures/targets/ in the checkout): a wheel has it too
TARGET = Path(str(resources.files("harness.targets"))) / "minichain"
SCRIPT = Path(__file__).resolve().parent / "agent" / "demo_script.yaml"
DEMO_KEY_ENV = "HARNESS_DEMO_API_KEY"


def prepare(dest: Path, faults: list[str | Path] | None = None) -> Path:
    """A copy of minichain with the fault patches applied — names of faults/ (default: all ten) or
    patch files — returns its directory."""
    if not (TARGET / "run.sh").is_file():
        raise BadInput(f"this install of harness lacks minichain ({TARGET}); reinstall it: pip install --force-reinstall harness")
    if shutil.which("git") is None:
        raise BadInput("harness demo needs git (for `git apply` and the ledger): install git")
    work = dest / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    patches = sorted((TARGET / "faults").glob("*.patch")) if faults is None else \
        [f if isinstance(f, Path) else TARGET / "faults" / f"{f}.patch" for f in faults]
    for patch in patches:
        r = subprocess.run(["git", "apply", str(patch)], cwd=work, capture_output=True, text=True)
        if r.returncode:
            raise BadInput(f"could not apply {patch.name}: {r.stderr.strip()}")
    return work


def spec_dict(workdir: Path, base_url: str | None, model: str, key_env: str | None, engine=None,
              playbooks: list[str] = ()) -> dict:
    """The run spec of the demo: local transport, minichain's playbook (and `playbooks`, files),
    generous budgets; launched as a job of `engine` (engines.LocalRay or LocalSlurm) when there is
    one; no model when `base_url` is None (offline)."""
    launch = {"command": "bash run.sh", "env": {"PYTHON": sys.executable},
              "unset": list(PROXY_VARS), "settle": 5, "stall": 60}
    if isinstance(engine, LocalRay):
        launch |= {"via": "ray-job", "ray": {"address": engine.address, "temp_dir": engine.dir,
                                             "python": sys.executable, "stop_wait": 20}}
    elif isinstance(engine, LocalSlurm):
        launch |= {"via": "slurm", "slurm": {"python": sys.executable, "stop_wait": 20}}
        launch["env"] |= {"SLURM_CONF": engine.conf}
    return {
        "host": "localhost", "transport": "local", "workdir": str(workdir),
        "launch": launch,
        "playbooks": ["minichain", *(str(Path(p).resolve()) for p in playbooks)],
        **({"model": {"base_url": base_url, "name": model, "api_key_env": key_env}} if base_url else {}),
        "budgets": {"relaunches": 20, "wall_clock": "20m", "agent_steps": 100, "stuck_after": 3},
    }


def overhead(st, total: float) -> tuple[float, float]:
    """Wall time not spent waiting for the run or the model: (seconds, share of total)."""
    own = max(0.0, total - st.run_seconds - st.model_seconds)
    return own, (own / total if total else 0.0)


def key_for_scripted() -> None:
    # the scripted server wants an Authorization header like any endpoint; this is no secret
    os.environ.setdefault(DEMO_KEY_ENV, "scripted-demo-key")


async def run_demo(dest: Path, ui=None, *, base_url: str | None = None, model: str = "scripted-demo",
                   key_env: str | None = None, engine=None, offline: bool = False, playbooks: list[str] = (),
                   faults: list[str] | None = None):
    """Run the demo session in `dest` (each attempt a job of `engine`, a started engines.LocalRay
    or LocalSlurm, when given; `faults`: names of faults/, default all ten; `playbooks`: more
    playbook files; `offline`: no model at all); returns (session, wall seconds, whether the
    model was scripted)."""
    import time

    from .agent.scripted import ScriptedModel, ScriptedServer
    from .session.runner import run_spec
    from .session.store import new_session
    from .spec import RunSpec, dump_spec

    work = prepare(dest, faults)
    server = None
    if base_url is None and not offline:
        key_for_scripted()
        server = ScriptedServer(ScriptedModel.from_file(SCRIPT, name=model)).start()
        base_url, key_env = server.url, DEMO_KEY_ENV
    try:
        spec = RunSpec.model_validate(spec_dict(work, None if offline else base_url, model, key_env, engine,
                                                playbooks))
        directory = new_session(dump_spec(spec))
        t0 = time.monotonic()
        ses = await run_spec(spec, directory, ui=ui, offline=offline)
        return ses, time.monotonic() - t0, server is not None
    finally:
        if server:
            server.close()
