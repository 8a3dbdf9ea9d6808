"""The `harness` command line: one Typer app, one module per command group.

Each group module defines its commands as plain functions and a `register(app)` that adds them;
none imports this package or another group back (the one sibling import, `continue --fg` using
the loop's foreground runner, goes one way). Commands import what they need when they run, so
`harness --help` or `harness status` never loads openai, asyncssh, paramiko or pydantic.
"""

from __future__ import annotations

import os
import sys

import typer

from . import analyze, export, host, learn, loop, replay, report, sessions
from ..errors import HarnessError

try:  # typer >= 0.24 carries its own copy of click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import ClickException

GROUPS = (analyze, host, loop, sessions, report, export, replay, learn)

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Unattended training-debug harness.")
for _group in GROUPS:
    _group.register(app)


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
