"""The loop's commands: run, demo, diff, undo. Each turns flags into a call (harness.session,
harness.demo) and shows the result; registered by harness.cli."""

from __future__ import annotations

import contextlib
import functools
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import BadInput


@functools.cache
def _console():
    from ..ui import cli_console

    return cli_console()


def _finish(directory: Path) -> None:
    """Write the report and say how the session ended (its journal says); exit 0 when the chain
    passed, 1 when not."""
    from ..session.journal import Journal
    from ..session.reports import write_session_reports
    from ..session.state import fold

    report = write_session_reports(directory)
    st = fold(Journal.read(directory / "journal.jsonl"))
    _console().print(f"session {directory.name}: {st.ended['reason'] if st.ended else 'not ended'} after "
                      f"{len(st.attempts)} attempt(s); report: {report}")
    raise typer.Exit(0 if st.passed else 1)


def run(
    spec_path: Path = typer.Argument(Path("harness.yaml"), metavar="SPEC", help="The run spec."),
    override: list[str] = typer.Option([], "-c", help="Override a spec field: -c budgets.relaunches=5 (repeatable)."),
    offline: bool = typer.Option(False, "--offline", help="Declared fixes only: never call the model."),
    detach: bool = typer.Option(False, "--detach", help="Run in the background and return at once."),
) -> None:
    """Run a session until the chain passes or a budget or stop rule ends it."""
    from ..session.store import new_session
    from ..spec import dump_spec, load_spec

    spec = load_spec(spec_path, override)
    check_playbook(spec)
    directory = new_session(dump_spec(spec))
    if detach:
        from ..session.detach import start_background

        pid = start_background(directory, offline)
        typer.echo(f"session {directory.name} started in the background (pid {pid}) on {spec.host}:{spec.workdir}; "
                   f"watch: harness status {directory.name}")
        return
    run_session_fg(directory, offline, spec,
                   header=f"session {directory.name} ({directory}) — {spec.host}:{spec.workdir}")


def check_playbook(spec) -> None:
    """Load the spec's playbook now: a broken one is a one-line error before a session exists
    (else it leaves a session with an empty journal behind)."""
    from ..playbook import load_playbook

    load_playbook(spec.playbooks or None)


def run_session_fg(directory: Path, offline: bool, spec=None, header: str | None = None) -> None:
    """Run (or resume) a session in this process, holding its lock, with the live view (which
    prints `header` first: a pipe closed before even that line does not end the session)."""
    import asyncio
    import os

    from ..session.detach import install_stop, lose_terminal, mark_holder, take_lock
    from ..session.reports import write_session_reports
    from ..session.runner import run_spec
    from ..spec import load_spec
    from ..ui import SessionView, ViewConsole, cli_console

    spec = spec or load_spec(directory / "spec.yaml")
    fd = take_lock(directory)
    mark_holder(fd, os.getpid())
    try:
        lost = functools.partial(lose_terminal, directory)  # its terminal or pipe went away: on into controller.log
        with SessionView(cli_console(ViewConsole), spec.budgets, on_lost=lost) as view:
            hung_up = functools.partial(view.lost, "the terminal hung up (SIGHUP)")
            if header:
                view.say(header)
            asyncio.run(run_spec(spec, directory, offline=offline, ui=view,
                                 on_session=lambda s: install_stop(s, directory, on_hangup=hung_up)))
    except asyncio.CancelledError:  # a signal stopped it (install_stop): its end is journaled like any other
        pass
    except BaseException:  # the session ended on an error (journaled): its report still gets written
        if (directory / "journal.jsonl").stat().st_size:
            with contextlib.suppress(Exception):
                write_session_reports(directory)
        raise
    finally:
        os.close(fd)
    _finish(directory)


def demo(
    base_url: Optional[str] = typer.Option(None, help="A real OpenAI-compatible endpoint instead of the scripted model."),
    model: str = typer.Option("scripted-demo", help="The model name (with --base-url)."),
    api_key_env: Optional[str] = typer.Option(None, help="The env var holding the endpoint's key (with --base-url)."),
    ray: bool = typer.Option(False, "--ray", help="Launch each attempt as a Ray job on a throwaway local Ray head "
                             "(needs pip install 'harness[ray]')."),
    slurm: bool = typer.Option(False, "--slurm", help="Launch each attempt as an sbatch job on throwaway local "
                               "Slurm daemons (needs root and Debian's slurm-wlm and munge)."),
    offline: bool = typer.Option(False, "--offline", help="No model: declared fixes only (a learned playbook's too)."),
    playbook: List[Path] = typer.Option([], "--playbook", "-p", help="Another playbook file to use beside "
                                        "minichain's, e.g. one `harness learn` wrote (repeatable)."),
    fault: List[str] = typer.Option([], "--fault", help="Apply only this fault of minichain's faults/ "
                                    "(repeatable; default: the ten of the story)."),
) -> None:
    """The whole loop on this machine: minichain with all ten faults, to a green chain."""
    import asyncio
    import contextlib

    from ..demo import overhead, run_demo
    from ..engines import LocalRay, LocalSlurm
    from ..ui import SessionView

    if ray and slurm:
        raise BadInput("choose one of --ray and --slurm")
    if offline and base_url:
        raise BadInput("choose one of --offline and --base-url")
    from ..demo import TARGET

    if unknown := [f for f in fault if not (TARGET / "faults" / f"{f}.patch").is_file()]:
        known = ", ".join(p.stem for p in sorted((TARGET / "faults").glob("*.patch")))
        raise BadInput(f"no fault {', '.join(unknown)}; minichain's faults: {known}")
    for p in playbook:
        if not p.is_file():
            raise BadInput(f"{p}: no such playbook file")

    dest = Path(tempfile.mkdtemp(prefix="harness-demo-"))
    if offline:
        _console().print("[bold]Offline[/]: no model; only declared fixes (the playbooks') are applied.")
    elif base_url is None:
        _console().print("[bold]The model is scripted[/]: its answers come from harness/agent/demo_script.yaml, served "
                          "by a local OpenAI-compatible HTTP server (no network, no API key).")
    which = ", ".join(fault) if fault else "01-10"
    _console().print(f"workdir: {dest / 'minichain'} (minichain with faults {which} applied)")
    engine = LocalRay() if ray else LocalSlurm() if slurm else None
    if engine:
        _console().print(f"starting a throwaway local {'Ray head' if ray else 'Slurm'} in {engine.dir} "
                          "(stopped at the end)")
    with engine or contextlib.nullcontext(), SessionView(_console()) as view:
        ses, took, _ = asyncio.run(run_demo(dest, view, base_url=base_url, model=model, key_env=api_key_env,
                                            engine=engine, offline=offline, playbooks=[str(p) for p in playbook],
                                            faults=fault or None))
    st = ses.state
    own, share = overhead(st, took)
    fixes = sum(1 for a in st.attempts for c in a.changes if not c.startswith("agent:"))
    _console().print(f"\n{'chain passed' if st.passed else 'chain NOT passed'}: {len(st.attempts)} attempts in "
                      f"{took:.0f} s; {fixes} declared fix(es), {st.model_calls} model calls ({st.tokens} tokens)")
    _console().print(f"waiting for the run {st.run_seconds:.1f} s, for the model {st.model_seconds:.1f} s; "
                      f"the harness's own overhead {own:.1f} s = {share:.1%} of the total")
    _console().print(f"see the changes: harness diff {ses.session}")
    _finish(ses.dir)


def eval_(
    suite: Optional[Path] = typer.Argument(None, help="A suite file (default: the shipped suite, one scenario per "
                                           "minichain fault)."),
    model_url: Optional[str] = typer.Option(None, "--model-url", help="An OpenAI-compatible endpoint (default: the "
                                            "scripted model)."),
    model: str = typer.Option("scripted", "--model", help="The model name (with --model-url)."),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="The env var holding its key."),
    jobs: int = typer.Option(1, "--jobs", min=1, help="Scenarios run at once (each is a real run: mind the cores)."),
    keep: Optional[Path] = typer.Option(None, "--keep", help="Keep each scenario's workdir and session here."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object: rows and totals."),
) -> None:
    """Run the whole loop over a suite of fault scenarios: one row per scenario, then the totals."""
    import asyncio
    import json

    from ..demo import DEMO_KEY_ENV, SCRIPT, key_for_scripted
    from ..evaluate import load_suite, run_suite, totals

    s, base = load_suite(suite)
    server = None
    if model_url is None:
        from ..agent.scripted import ScriptedModel, ScriptedServer

        key_for_scripted()
        server = ScriptedServer(ScriptedModel.from_file(SCRIPT, name=model)).start()
        model_url, api_key_env = server.url, DEMO_KEY_ENV
        if not as_json:
            _console().print("[bold]The model is scripted[/]: the demo's answer key (harness/agent/demo_script.yaml) "
                              "solves only the scenarios it has a script for — the story's ten faults; others end "
                          "gave_up. Give --model-url to measure a real model.")

    def row_line(r: dict) -> None:
        if not as_json:
            _console().print(f"{'✓' if r['solved'] else '✗'} {r['scenario']}: {r['end']} after {r['attempts']} attempt(s), "
                              f"{r['model_calls']} model calls, {r['tokens']} tokens, ${r['money']:.4f}, {r['seconds']:.0f} s")
    try:
        rows = asyncio.run(run_suite(s, base, {"base_url": model_url, "name": model, "key_env": api_key_env},
                                     jobs=jobs, keep=keep, on_row=row_line))
    finally:
        if server:
            server.close()
    tot = totals(rows)
    if as_json:
        print(json.dumps({"model": model, "scripted": server is not None, "rows": rows, "totals": tot}, indent=1))
        return
    tps = f"{tot['tokens_per_solved']} tokens per solved" if tot["tokens_per_solved"] is not None else "none solved"
    _console().print(f"\nsolved {tot['solved']}/{tot['scenarios']} ({tot['solve_rate']:.0%}); median attempts "
                      f"{tot['median_attempts']}; {tps}; ${tot['money']:.4f}; {tot['seconds']:.0f} s of scenarios")


def diff(session: Optional[str] = typer.Argument(None, help="Session id (default: the latest).")) -> None:
    """The cumulative change a session made to the workdir (first attempt -> latest)."""
    import asyncio

    from ..session.reports import with_ledger
    from ..session.store import find_session

    text = asyncio.run(with_ledger(find_session(session), lambda led: led.diff()))
    sys.stdout.write(text or "(no change)\n")  # as git wrote it: `harness diff > x.patch; git apply x.patch`


def undo(
    session: Optional[str] = typer.Argument(None, help="Session id (default: the latest)."),
    to: int = typer.Option(1, "--to", help="Attempt whose workdir to restore (1: as the session found it)."),
) -> None:
    """Restore the workdir to what an attempt ran with."""
    import asyncio

    from ..session.reports import with_ledger
    from ..session.status import is_default_target
    from ..session.store import find_session

    if to < 1:
        raise BadInput("--to takes an attempt number, 1 or more")

    changed = asyncio.run(with_ledger(find_session(session, is_default_target), lambda led: led.restore(to)))
    _console().print(f"restored the workdir to attempt {to}: {len(changed)} file(s) changed"
                      + "".join(f"\n  {p}" for p in changed))


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.command()(demo)
    app.command(name="eval")(eval_)
    app.command()(diff)
    app.command()(undo)
