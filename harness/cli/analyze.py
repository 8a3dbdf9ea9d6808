"""`harness analyze` and `harness playbook list|show|check`: the analyzer and its knowledge."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer


def analyze(
    logs: List[Path] = typer.Argument(..., help="Log files to analyse."),
    playbook: List[str] = typer.Option([], "--playbook", "-p", help="A playbook NAME (looked up along the "
                                       "playbook path) or a YAML FILE; repeat to merge several; default: detected "
                                       "from the log, else the union of the shipped ones."),
    as_json: bool = typer.Option(False, "--json", help="Print the verdict as JSON (an array for several logs)."),
    digest: bool = typer.Option(False, "--digest", help="Include the digest a model would read."),
    max_tokens: int = typer.Option(4000, "--max-tokens", min=200, help="Digest size bound (tokens ≈ chars/4)."),
) -> None:
    """Say how far an RL run's chain got, what broke, why, and what usually fixes it."""
    from ..analyze import analyze_file, build_digest, check_log_path, last_lines_of
    from ..analyze.verdict import jsonable
    from ..ui import cli_console
    from ..playbook import load_playbook

    for p in logs:
        check_log_path(p)
    pb = load_playbook(playbook, Path.cwd()) if playbook else None
    now = time.time()
    out, console = [], cli_console()
    for p in logs:
        verdict, an = analyze_file(p, pb, now=now)
        if digest:
            last = last_lines_of(p, an) if verdict["outcome"] == "hang" else None
            verdict["digest"] = build_digest(verdict, an, max_tokens, last)
        if as_json:
            out.append(jsonable(verdict))
        else:
            from ..ui import show_verdict

            show_verdict(console, verdict)
    if as_json:
        sys.stdout.write(json.dumps(out[0] if len(out) == 1 else out, indent=2, ensure_ascii=False) + "\n")


def playbook_show(name: str = typer.Argument(..., help="A playbook name (along the playbook path) or a YAML file.")) -> None:
    """Print the merged playbook (its `extends:` resolved)."""
    from ..playbook import load_merged, to_yaml

    sys.stdout.write(to_yaml(load_merged(name, Path.cwd())))


def playbook_list(
    spec: Optional[Path] = typer.Option(None, "--spec", help="Also say which playbooks this run spec uses."),
    as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
) -> None:
    """Every playbook along the lookup path ($HARNESS_PLAYBOOKS, ~/.config/harness/playbooks, shipped),
    which file each name resolves to, and what it shadows."""
    from ..playbook import listing

    rows = listing(_spec_playbooks(spec) if spec else None)
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=1) + "\n")
        return
    for r in rows:
        mark = "*" if r["used"] else " "
        note = f"  (shadowed by {r['shadowed_by']})" if r["shadowed_by"] else ""
        typer.echo(f"{mark} {r['name']:<22} {r['where']:<19} {r['path']}{note}")
    if spec:
        typer.echo(f"* used by {spec}, with what they extend")


def _spec_playbooks(path: Path) -> list[str]:
    from ..playbook import shipped_names
    from ..spec import load_spec

    return load_spec(path).playbooks or shipped_names()  # none named: the union of the shipped ones


def playbook_check(file: Path = typer.Argument(..., help="A playbook YAML file.")) -> None:
    """Validate a playbook file (and its `extends:`)."""
    from ..playbook import load_merged

    pb = load_merged(str(file))
    n_markers = sum(len(s.markers) for s in pb.stages.values())
    guesses = sum(p.guess for s in pb.stages.values() for p in s.markers) + sum(s.guess for s in pb.signatures)
    typer.echo(f"{file}: ok — {n_markers} markers, {len(pb.signatures)} signatures ({guesses} guesses), "
               f"{len(pb.noise)} noise, {len(pb.prefixes)} prefixes")


def register(app: typer.Typer) -> None:
    app.command()(analyze)
    playbook_app = typer.Typer(no_args_is_help=True, help="List, show and check playbooks.")
    playbook_app.command("list")(playbook_list)
    playbook_app.command("show")(playbook_show)
    playbook_app.command("check")(playbook_check)
    app.add_typer(playbook_app, name="playbook")
