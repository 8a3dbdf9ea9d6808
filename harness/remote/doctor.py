"""`harness doctor SPEC`: can this spec run? One clear line per check."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..errors import TransportError
from .transport import connect


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def script_paths(command: str) -> list[str]:
    """Files the launch command names (`bash scripts/run.sh`, `python -m x` names none)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    return [w for w in words[:3] if not w.startswith("-") and "=" not in w
            and (w.endswith((".sh", ".py", ".bash")) or ("/" in w and not w.startswith("/usr/") and "." in w))]


def expand(word: str, env: dict[str, str]) -> str:
    """`$NAME` and `${NAME}` replaced from the launch's env (others left as they are)."""
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", lambda m: env.get(m.group(1) or m.group(2), m.group(0)), word)


async def doctor(spec) -> list[Check]:
    """Run the checks of a RunSpec in order; stop after the connection if it fails."""
    hs = spec.host_spec()
    try:
        t = await connect(hs)
    except TransportError as e:  # unreachable, auth, unknown or changed host key: the message says what to do
        return [Check("ssh", False, str(e))]
    checks = [Check("ssh", True, f"connected to {spec.host} over {t.name}; host key verified")]
    try:
        w = shlex.quote(spec.workdir)
        r = await t.run(f"test -d {w} || exit 3; cd {w} && f=$(mktemp .harness-doctor.XXXXXX) && rm -f \"$f\"",
                        timeout=20)
        checks.append(Check("workdir", r.ok, f"{spec.workdir} is writable" if r.ok else
                            f"{spec.workdir} does not exist on {spec.host}; create it or fix `workdir:`"
                            if r.returncode == 3 else f"{spec.workdir} is not writable: {r.tail(2)}"))
        for tool, probe in (("git", "git --version"), ("python", "python3 --version || python --version")):
            r = await t.run(probe, timeout=20)
            checks.append(Check(tool, r.ok, (r.stdout + r.stderr).strip().splitlines()[0] if r.ok else
                                f"{tool} not found on {spec.host}; install it or put it on PATH"))
        from .hostinfo import host_info, summary
        from .preflight import preflight

        info = await host_info(t, spec)
        checks += await preflight(t, spec.preflight, info)
        checks += [Check(*c) for c in summary(info)]
        from .scheduled import doctor_check

        if line := await doctor_check(spec.launch, t, spec.workdir):
            checks.append(Check(*line))
        for path in script_paths(spec.launch.command):
            path = expand(path, spec.launch.env)
            r = await t.run(f"cd {w} && test -f {shlex.quote(path)}", timeout=20)
            checks.append(Check("launch", r.ok, f"{path} exists" if r.ok else
                                f"{path} (from `launch.command`) not found in {spec.workdir}"))
    finally:
        await t.close()
    for node in spec.nodes:
        checks += await _node(spec, node)
    return checks


async def _node(spec, node) -> list[Check]:
    """A worker node: it answers over SSH, its workdir is there, its ports are free and its
    accelerators have the memory the spec asks for."""
    from .hostinfo import host_info
    from .preflight import preflight

    name, wd = f"node {node.label}", node.workdir or spec.workdir
    try:
        t = await connect(spec.host_spec(node))
    except TransportError as e:
        return [Check(name, False, str(e))]
    try:
        r = await t.run(f"test -d {shlex.quote(wd)}", timeout=20)
        checks = [Check(name, r.ok, f"connected to {node.host} over {t.name}; {wd} is there" if r.ok else
                        f"{wd} does not exist on {node.host}; create it or set the node's `workdir:`")]
        info = await host_info(t, spec) if spec.preflight.device_memory_gb is not None else None
        checks += [Check(f"{name} {c.name}", c.ok, c.detail) for c in await preflight(t, spec.preflight, info)]
        return checks
    finally:
        await t.close()
