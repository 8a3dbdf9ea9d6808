"""The host and the spec: trust, doctor, init, bench remote."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import BadInput


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

    from ..remote.hostkeys import trust as trust_host

    def confirm(line: str) -> bool:
        if not sys.stdin.isatty():
            return False
        sys.stderr.write(f"{line}\ntrust it? [y/N] ")
        sys.stderr.flush()
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    typer.echo(asyncio.run(trust_host(host, ssh_config=ssh_config, known_hosts=known_hosts,
                                      fingerprint_given=fingerprint, confirm=confirm)))


def doctor(spec: Path = typer.Argument(..., help="The run spec (harness.yaml).")) -> None:
    """Check a spec: SSH, host key, workdir, git, python, the launch script; the model's key,
    endpoint and protocol. Exit 1 if any fails."""
    import asyncio

    from ..remote.doctor import doctor as run_checks
    from ..spec import load_spec

    s = load_spec(spec)
    checks = [(c.name, c.ok, c.detail) for c in asyncio.run(run_checks(s))]
    if s.model is not None:
        from ..agent.doctor import model_checks

        checks += asyncio.run(model_checks(s.model))
    for name, ok, detail in checks:
        typer.echo(f"{'✓' if ok else '✗'} {name}: {detail}")
    if not all(ok for _, ok, _ in checks):
        raise typer.Exit(1)


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
    preset: Optional[str] = typer.Option(None, "--preset", metavar="NAME",
                                         help="A spec for a real stack: verl, mindspeed-rl, rllm, openrlhf, trl, "
                                         "pangu-910c (each value commented with why)."),
) -> None:
    """Write a commented run spec (harness.yaml) for a host and a launch command, or for a stack
    (--preset)."""
    from ..spec_template import write_preset, write_template

    if preset is not None:
        typer.echo(write_preset(out, preset, host=host, workdir=workdir, transport=transport, force=force))
        return
    typer.echo(write_template(out, host=host, command=command, workdir=workdir, transport=transport, force=force))


def bench_remote(
    host: str = typer.Option(..., "--host", help="Host name or ~/.ssh/config alias."),
    transport: str = typer.Option("asyncssh", "--transport", help="asyncssh | paramiko | local."),
    ssh_config: Optional[str] = typer.Option(None, "--ssh-config", help="ssh config file (default ~/.ssh/config)."),
    known_hosts: Optional[str] = typer.Option(None, "--known-hosts", help="known_hosts file."),
    n: int = typer.Option(300, "-n", min=2, help="Timed repetitions per operation (lines followed: up to 100)."),
    catch_up_mb: int = typer.Option(256, "--catch-up-mb", min=0, help="MiB of log a follower catches up on (0: skip)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """p50/p95 of run `true`, read 4 KB, stat, a channel per command, follow latency, catch-up."""
    import asyncio

    from ..remote.latency import bench
    from ..remote.transport import HostSpec

    if transport not in ("asyncssh", "paramiko", "local"):
        raise BadInput(f"unknown transport {transport!r}; use asyncssh, paramiko or local")
    out = asyncio.run(bench(HostSpec(host, transport=transport, ssh_config=ssh_config, known_hosts=known_hosts), n,
                            follow_n=max(2, min(100, n)), catch_up_mb=catch_up_mb))
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    for op, st in {**out["ops"], **out["baseline"]}.items():
        typer.echo(f"{op:28} p50 {st['p50_ms']:8.2f} ms   p95 {st['p95_ms']:8.2f} ms")
    fl = out["follow_latency_ms"]
    typer.echo(f"{'follow latency':28} p50 {fl['p50']:8.2f} ms   p95 {fl['p95']:8.2f} ms")
    if cu := out.get("catch_up"):
        typer.echo(f"{'catch-up after a reconnect':28} {cu['mb_per_s']:8.1f} MB/s ({cu['mb']} MB in {cu['seconds']:.2f} s)")


def register(app: typer.Typer) -> None:
    for command in (trust, doctor, init):
        app.command()(command)
    bench_app = typer.Typer(no_args_is_help=True, help="Measure the harness (figures, not tests).")
    bench_app.command("remote")(bench_remote)
    app.add_typer(bench_app, name="bench")
