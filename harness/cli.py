"""The `harness` command line. Each command turns flags into a call; nothing else."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

try:  # typer >= 0.24 carries its own copy of click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import ClickException

from .errors import BadInput, HarnessError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Unattended training-debug harness.")
playbook_app = typer.Typer(no_args_is_help=True, help="Show and check playbooks.")
app.add_typer(playbook_app, name="playbook")


@app.command()
def analyze(
    logs: List[Path] = typer.Argument(..., help="Log files to analyse."),
    playbook: Optional[str] = typer.Option(None, "--playbook", "-p", help="Shipped playbook NAME or a YAML FILE; "
                                           "default: detected from the log, else the union of all."),
    as_json: bool = typer.Option(False, "--json", help="Print the verdict as JSON (an array for several logs)."),
    digest: bool = typer.Option(False, "--digest", help="Include the digest a model would read."),
    max_tokens: int = typer.Option(4000, "--max-tokens", min=200, help="Digest size bound (tokens ≈ chars/4)."),
) -> None:
    """Say how far an RL run's chain got, what broke, why, and what usually fixes it."""
    from .analyze import analyze_file, build_digest, check_log_path
    from .analyze.verdict import jsonable
    from .ui import cli_console
    from .playbook import load_playbook

    for p in logs:
        check_log_path(p)
    pb = load_playbook(playbook) if playbook else None
    now = time.time()
    out, console = [], cli_console()
    for p in logs:
        verdict, an = analyze_file(p, pb, now=now)
        if digest:
            verdict["digest"] = build_digest(verdict, an, max_tokens)
        if as_json:
            out.append(jsonable(verdict))
        else:
            from .ui import show_verdict

            show_verdict(console, verdict)
    if as_json:
        sys.stdout.write(json.dumps(out[0] if len(out) == 1 else out, indent=2, ensure_ascii=False) + "\n")


@playbook_app.command("show")
def playbook_show(name: str = typer.Argument(..., help="Shipped playbook name or a YAML file.")) -> None:
    """Print the merged playbook (its `extends:` resolved)."""
    from .playbook import load_merged, to_yaml

    sys.stdout.write(to_yaml(load_merged(name)))


@playbook_app.command("check")
def playbook_check(file: Path = typer.Argument(..., help="A playbook YAML file.")) -> None:
    """Validate a playbook file (and its `extends:`)."""
    from .playbook import load_merged

    pb = load_merged(str(file))
    n_markers = sum(len(s.markers) for s in pb.stages.values())
    guesses = sum(p.guess for s in pb.stages.values() for p in s.markers) + sum(s.guess for s in pb.signatures)
    typer.echo(f"{file}: ok — {n_markers} markers, {len(pb.signatures)} signatures ({guesses} guesses), "
               f"{len(pb.noise)} noise, {len(pb.prefixes)} prefixes")


bench_app = typer.Typer(no_args_is_help=True, help="Measure the harness (figures, not tests).")
app.add_typer(bench_app, name="bench")


@app.command()
def trust(
    host: str = typer.Argument(..., help="Host name or ~/.ssh/config alias."),
    ssh_config: Optional[str] = typer.Option(None, "--ssh-config", help="ssh config file (default ~/.ssh/config)."),
    known_hosts: Optional[str] = typer.Option(None, "--known-hosts", help="known_hosts file (default from the config)."),
    fingerprint: Optional[str] = typer.Option(None, "--fingerprint", metavar="SHA256:…",
                                              help="Trust the key only if it has this fingerprint (no question asked)."),
) -> None:
    """Show HOST's key fingerprint and add it to known_hosts once you confirm it (or it matches
    --fingerprint); a changed key is refused."""
    import asyncio

    from .remote.hostkeys import trust as trust_host

    def confirm(line: str) -> bool:
        if not sys.stdin.isatty():
            return False
        sys.stderr.write(f"{line}\ntrust it? [y/N] ")
        sys.stderr.flush()
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    typer.echo(asyncio.run(trust_host(host, ssh_config=ssh_config, known_hosts=known_hosts,
                                      fingerprint_given=fingerprint, confirm=confirm)))


@app.command()
def doctor(spec: Path = typer.Argument(..., help="The run spec (harness.yaml).")) -> None:
    """Check a spec: SSH, host key, workdir, git, python, the launch script; the model's key,
    endpoint and protocol. Exit 1 if any fails."""
    import asyncio

    from .remote.doctor import doctor as run_checks
    from .spec import load_spec

    s = load_spec(spec)
    checks = [(c.name, c.ok, c.detail) for c in asyncio.run(run_checks(s))]
    if s.model is not None:
        from .agent.doctor import model_checks

        checks += asyncio.run(model_checks(s.model))
    for name, ok, detail in checks:
        typer.echo(f"{'✓' if ok else '✗'} {name}: {detail}")
    if not all(ok for _, ok, _ in checks):
        raise typer.Exit(1)


@app.command()
def init(
    host: Optional[str] = typer.Option(None, "--host", help="Host name or ~/.ssh/config alias "
                                       "(default: localhost with the local transport)."),
    command: str = typer.Option("bash run.sh", "--command", help="The shell command that starts the run."),
    workdir: Optional[str] = typer.Option(None, "--workdir", help="Absolute path of the code on the host "
                                          "(default: this directory)."),
    transport: Optional[str] = typer.Option(None, "--transport", help="asyncssh | paramiko | local "
                                            "(default: asyncssh with --host, else local)."),
    out: Path = typer.Option(Path("harness.yaml"), "-o", "--output", help="The file to write."),
    force: bool = typer.Option(False, "--force", help="Overwrite the file if it exists."),
) -> None:
    """Write a commented run spec (harness.yaml) for a host and a launch command."""
    from .spec_template import write_template

    typer.echo(write_template(out, host=host, command=command, workdir=workdir, transport=transport, force=force))


@bench_app.command("remote")
def bench_remote(
    host: str = typer.Option(..., "--host", help="Host name or ~/.ssh/config alias."),
    transport: str = typer.Option("asyncssh", "--transport", help="asyncssh | paramiko | local."),
    ssh_config: Optional[str] = typer.Option(None, "--ssh-config", help="ssh config file (default ~/.ssh/config)."),
    known_hosts: Optional[str] = typer.Option(None, "--known-hosts", help="known_hosts file."),
    n: int = typer.Option(300, "-n", min=2, help="Timed repetitions per operation."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """p50/p95 of run `true`, read 4 KB, stat, a channel per command, and follow latency."""
    import asyncio

    from .remote.latency import bench
    from .remote.transport import HostSpec

    if transport not in ("asyncssh", "paramiko", "local"):
        raise BadInput(f"unknown transport {transport!r}; use asyncssh, paramiko or local")
    out = asyncio.run(bench(HostSpec(host, transport=transport, ssh_config=ssh_config, known_hosts=known_hosts), n))
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    for op, st in {**out["ops"], **out["baseline"]}.items():
        typer.echo(f"{op:28} p50 {st['p50_ms']:8.2f} ms   p95 {st['p95_ms']:8.2f} ms")
    fl = out["follow_latency_ms"]
    typer.echo(f"{'follow latency':28} p50 {fl['p50']:8.2f} ms   p95 {fl['p95']:8.2f} ms")


from . import cli_loop  # noqa: E402,F401  (registers run, demo, diff, undo on `app`)
from . import cli_sessions  # noqa: E402,F401  (continue, status, sessions, stop, logs, attach)
from . import cli_report  # noqa: E402,F401
from . import cli_export  # noqa: E402,F401  (export)
from . import cli_replay  # noqa: E402,F401


def main() -> None:
    try:
        rc = app(standalone_mode=False)  # not standalone: our errors are printed our way
        if isinstance(rc, int) and rc:
            raise SystemExit(rc)
    except HarnessError as e:
        sys.stderr.write(f"error: {e}\n")
        raise SystemExit(2) from None
    except typer.Abort:
        raise SystemExit(130) from None
    except ClickException as e:  # usage errors: one line, and where to look
        ctx = getattr(e, "ctx", None)
        where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        if e.format_message():  # an empty one: the help was shown for a command given no arguments
            sys.stderr.write(f"error: {e.format_message()}{where}\n")
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as e:  # a bug: one line here, the traceback in a file
        sys.stderr.write(f"error: internal error ({type(e).__name__}: {' '.join(str(e).split())[:300]}); "
                         f"the traceback is in {_save_traceback()} — please report it\n")
        raise SystemExit(1) from None


def _save_traceback() -> str:
    import tempfile
    import traceback

    fd, path = tempfile.mkstemp(prefix="harness-error-", suffix=".txt")
    with os.fdopen(fd, "w") as fh:
        traceback.print_exc(file=fh)
    return path


if __name__ == "__main__":
    main()
