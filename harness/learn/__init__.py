"""`harness learn`: a session's successful changes become validated playbook entries.

    result = learn(session_dir)                 # reads the journal, the logs and the ledger
    text = render(result.offered, Path("team/pangu-learned.yaml"), result.extends, [result.session])

propose.py turns each forward step into a proposal; shape.py says whether a change has a declared
fix's shape; signature.py generalises the root-cause line; write.py writes the playbook file.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .propose import Proposal, Step, healthy_hits, propose, steps, validate, with_entries
from .write import render, write

__all__ = ["learn", "render", "write", "Learned", "healthy_logs"]


@dataclass
class Learned:
    session: str
    steps: list[Step]
    proposals: list[Proposal]
    extends: list[str]  # the session's playbooks: what the learned file extends

    @property
    def offered(self) -> list[Proposal]:
        return [p for p in self.proposals if p.ok]


def healthy_logs() -> list[Path]:
    """The healthy logs shipped with the package (fixtures/logs in the checkout)."""
    d = Path(str(resources.files("harness.healthy")))
    return sorted({*d.glob("healthy-*.log"), *d.glob("*-pass.log")})


def learn(directory: Path, healthy: list[Path] = ()) -> Learned:
    from ..analyze import analyze_file
    from ..playbook import load_playbook, shipped_names
    from ..session.journal import Journal
    from ..session.state import fold
    from ..spec import load_spec

    events = Journal.read(directory / "journal.jsonl")
    spec = load_spec(directory / "spec.yaml")
    pb = load_playbook(spec.playbooks or None)
    all_steps = steps(events)
    todo = [s for s in all_steps if not s.skip]
    changes = asyncio.run(_changes(directory, todo)) if todo else {}
    log = lambda n: directory / "attempts" / f"{n:02d}.log"  # noqa: E731
    passed = [log(a.n) for a in fold(events).attempts if (a.verdict or {}).get("outcome") == "pass"]
    clean = [*healthy_logs(), *(p for p in passed if p.is_file()), *healthy]
    proposals = [propose(s, *changes[s.attempt], pb, directory.name) for s in todo]
    fresh = [p for p in proposals if p.ok]  # the others (no line to match, a secret) are out already
    for p in fresh:
        validate(p, log=log(p.attempt), base=pb, change=changes[p.attempt][0], analyze=analyze_file)
    healthy_hits(fresh, clean)
    # together too: an entry must still be the root cause of its own log beside the others
    ok = [p for p in proposals if p.ok]
    together = with_entries(pb, ok)
    for p in ok:
        verdict, _ = analyze_file(log(p.attempt), together)
        if (got := (verdict.get("root_cause") or {}).get("signature")) != p.entry["id"]:
            p.problems.append(f"beside the other learned entries the root cause on its log is {got or 'none'}")
    return Learned(directory.name, all_steps, proposals, list(spec.playbooks or shipped_names()))


async def _changes(directory: Path, todo: list[Step]) -> dict[int, tuple[dict, str]]:
    """attempt -> (the change before the next attempt: path -> (before, after), its diff), from the
    session's ledger on its host."""
    from ..session.reports import with_ledger

    async def work(led):
        out = {}
        for s in todo:
            a, b = s.attempt, s.next
            files = await led.changed_files(a, b)
            out[a] = ({f: (await led.file_at(a, f), await led.file_at(b, f)) for f in files}, await led.diff(a, b))
        return out

    return await with_ledger(directory, work)
