"""What the controller does about a failed attempt, in this order: the declared fix of its
signature; for an infrastructure failure, the spec's cleanup and a retry (saying what the
cleanup did and what still holds the ports); otherwise an agent turn. Also the ways a session
ends that these steps raise."""

from __future__ import annotations

import re
import shlex

from ..agent.fixes import apply_fix
from ..playbook import Fix
from .nodes import cleanup_nodes
from .turn import GaveUp, NoChange, agent_turn


class SessionEnd(Exception):
    reason = "stopped"


class Stuck(SessionEnd):
    reason = "stuck"


class GaveUpEnd(SessionEnd):
    reason = "gave_up"


class BudgetOver(SessionEnd):
    def __init__(self, which: str):
        super().__init__(f"the {which} budget would be exceeded")
        self.reason = f"budget:{which}"


async def respond(ses, n: int, verdict: dict) -> None:
    """Known fix first, then cleanup-and-retry for infra failures, then the agent."""
    st, spec = ses.state, ses.spec
    root = verdict.get("root") or {}
    fix = root.get("fix")
    key = (verdict["fingerprint"], root.get("signature"))
    if fix and fix["kind"] != "cleanup_retry" and key not in st.fixes_tried:
        ses.activity(f"applying the declared fix of {root.get('signature')}")
        res = await apply_fix(ses.transport, Fix(**fix), workdir=spec.workdir, env=st.env, unset=st.unset)
        ses.emit("fix", attempt=n, fingerprint=key[0], signature=key[1], kind=fix["kind"],
                 description=res.description, applied=res.applied, already=res.already, files=res.files,
                 env=res.env, unset=res.unset, origin=root.get("origin", ""))
        if res.applied or res.already:
            return
    infra = root.get("class") == "infra" or (fix and fix["kind"] == "cleanup_retry")
    if infra and st.infra_retries < spec.budgets.infra_retries:
        ses.activity("infrastructure failure: cleaning up before a retry")
        await cleanup(ses, n, root.get("text") or "")
        return
    if ses.offline or ses.model is None:
        why = "offline" if ses.offline else "no model configured"
        raise GaveUpEnd(f"no declared fix for {root.get('signature') or verdict['outcome']} and {why}")
    digest = (ses.dir / "attempts" / f"{n:02d}.digest.txt").read_text(encoding="utf-8")
    try:
        await agent_turn(ses, n, verdict, digest)
    except GaveUp as exc:
        raise GaveUpEnd(str(exc)) from None
    except NoChange as exc:
        raise Stuck(str(exc)) from None


# ---------------------------------------------------------------------- infrastructure failures
# Who listens on each port in $PORTS: "port pid command line" (from /proc: no ss or lsof needed).
HOLDERS = r'''
for P in $PORTS; do
  h=$(printf '%04X' "$P")
  for ino in $(awk -v h=":$h" '$4 == "0A" && substr($2, length($2) - 4) == h {print $10}' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u); do
    f=$(find /proc/[0-9]*/fd -maxdepth 1 -lname "socket:\[$ino\]" 2>/dev/null | head -n 1)
    [ -n "$f" ] || { echo "$P ? ?"; continue; }
    p=${f#/proc/}; p=${p%%/*}
    echo "$P $p $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-100)"
  done
done
true
'''
_PORT = re.compile(r"(?i)\bport\D{0,3}(\d{4,5})\b|[:,]\s*(\d{4,5})\b")


def ports_in(text: str, also=()) -> list[int]:
    """Ports a root-cause line names (`port 18100`, `('0.0.0.0', 18100)`, `:29500`), and `also`."""
    found = [int(a or b) for a, b in _PORT.findall(text)]
    return sorted({p for p in [*found, *also] if 1024 <= p <= 65535})


async def cleanup(ses, n: int, root_text: str) -> None:
    """The spec's cleanup commands, then a look at what still holds the ports the failure names;
    journaled as one `cleanup` event whose detail says what was done and what is still wrong."""
    spec = ses.spec
    results = [await ses.transport.run(ses.ops(c), cwd=spec.workdir, timeout=120) for c in spec.cleanup]
    problems = [f"`{c}` failed (exit {'timeout' if r.timed_out else r.returncode}): {r.tail(1)[:160]}"
                for c, r in zip(spec.cleanup, results) if not r.ok]
    ports = ports_in(root_text, spec.preflight.ports)
    held = []
    if ports:
        r = await ses.transport.run(f"PORTS={shlex.quote(' '.join(map(str, ports)))}\n{HOLDERS}", timeout=60)
        held = [line.split(" ", 2) for line in r.stdout.splitlines() if line.count(" ") >= 2]
    problems += [f"port {port} still in use by pid {pid} ({cmd.strip() or '?'})" for port, pid, cmd in held]
    node_problems = await cleanup_nodes(ses.nodes, spec.cleanup)
    problems += node_problems
    if not spec.cleanup:
        problems.append("no cleanup command configured — add one to `cleanup:` in the spec (e.g. `ray stop --force`, "
                        "`pkill -f your_server`)")
    done = f"ran {len(spec.cleanup)} cleanup command(s)" if spec.cleanup else "nothing cleaned up"
    if spec.cleanup and ses.nodes:
        done += f" on the head and {len(ses.nodes)} node(s)"
    detail = done + ("; " + "; ".join(problems) if problems else "; the ports are free" if ports else "")
    ok = all(r.ok for r in results) and not held and bool(spec.cleanup) and not node_problems
    ses.emit("cleanup", attempt=n, commands=list(spec.cleanup), ok=ok, detail=detail[:600])
