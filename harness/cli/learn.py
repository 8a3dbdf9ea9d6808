"""`harness learn SESSION`: propose playbook entries from what fixed a session's failures.
Registered by harness.cli."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer


def learn(
    session: Optional[str] = typer.Argument(None, help="Session id or directory (default: the latest)."),
    out: Optional[Path] = typer.Option(None, "-o", "--output", help="The playbook file to write (merged into it "
                                       "when it exists); without it, nothing is written."),
    healthy: List[Path] = typer.Option([], "--healthy", help="Another healthy log no learned signature may match "
                                       "(repeatable; the shipped ones and the session's passing attempts always count)."),
    as_json: bool = typer.Option(False, "--json", help="Print the proposals (and the playbook text) as JSON."),
) -> None:
    """Turn a session's successful changes into validated playbook entries."""
    from ..learn import learn as run_learn, render, write
    from ..learn.write import check_target
    from ..analyze import check_log_path
    from ..session.store import find_session, session_or_directory

    for h in healthy:
        check_log_path(h)
    if out is not None:
        check_target(out)
    directory = session_or_directory(session) if session else find_session(None)
    if not (directory / "journal.jsonl").is_file() or not (directory / "spec.yaml").is_file():
        from ..errors import BadInput

        raise BadInput(f"{directory} is not a session directory (no journal.jsonl and spec.yaml)")
    result = run_learn(directory, healthy)
    target = out or Path(f"{directory.name}-learned.yaml")
    text = render(result.offered, target, result.extends, [result.session]) if result.offered else ""
    if out is not None and result.offered:
        write(text, out)
    if as_json:
        rows = [{"attempt": p.attempt, "kind": p.kind, "ok": p.ok, "problems": p.problems, "advanced": p.advanced,
                 "entry": p.entry} for p in result.proposals]
        skipped = [{"attempt": s.attempt, "why": s.skip} for s in result.steps if s.skip]
        sys.stdout.write(json.dumps({"session": result.session, "proposals": rows, "skipped": skipped,
                                     "written": str(out) if out and result.offered else None, "playbook": text},
                                    indent=1, ensure_ascii=False) + "\n")
        return
    for s in result.steps:
        if s.skip:
            typer.echo(f"  attempt {s.attempt}: skipped — {s.skip}")
    for p in result.proposals:
        what = {"fix": "a signature with a declared fix", "hint": "a signature with the change as its hint",
                "rule": "its metric rule with a hint"}[p.kind] + (" and a declared fix" if p.kind == "rule" and
                                                                  "fix" in p.entry else "")
        mark = "✓" if p.ok else "✗"
        typer.echo(f"{mark} attempt {p.attempt}: {p.entry['id']}: {what}" + ("" if p.ok else " — not offered: "
                                                                               + "; ".join(p.problems)))
    n = len(result.offered)
    if not n:
        typer.echo(f"nothing learned from session {result.session}")
        raise typer.Exit(1)
    if out is None:
        typer.echo(f"{n} entr{'y' if n == 1 else 'ies'} validated; write them with -o FILE "
                   "(e.g. ~/.config/harness/playbooks/learned.yaml)")
    else:
        typer.echo(f"wrote {n} entr{'y' if n == 1 else 'ies'} to {out}; use it with `playbooks: [{out.resolve()}]` in "
                   f"the spec, or put its directory on $HARNESS_PLAYBOOKS and name it `{out.stem}`")


def register(app: typer.Typer) -> None:
    app.command()(learn)
