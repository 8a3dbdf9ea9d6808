"""The phone's forced command (`command="… harness phone",restrict` in authorized_keys): what the
phone may ask for, checked word by word, and the environment the controller it starts needs.

The phone may run `continue`, `status`, `stop`, `report`, `logs` and `sessions`, each with the
flags listed in ALLOWED and at most one session id — nothing that names a file (`report --md`),
a path (`logs ../x`), or reaches a shell. The model's key comes from the user's env file
(`~/.config/harness/env`, the file the systemd unit reads, mode 0600), never from the key line.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from ..errors import BadInput

ALLOWED = {"continue": ("--offline",), "status": ("--json",), "stop": ("--keep-run",), "report": (),
           "logs": ("-f", "--follow", "--controller"), "sessions": ()}
_SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_LINE = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)\Z")


def phone_args(original: str) -> list[str]:
    """The harness arguments for `SSH_ORIGINAL_COMMAND`, or BadInput saying what is allowed."""
    allowed = ", ".join(ALLOWED)
    try:
        args = shlex.split(original or "status")
    except ValueError as e:
        raise BadInput(f"cannot read the command ({e}); allowed: {allowed}") from None
    if args and args[0] == "harness":
        args = args[1:]
    if not args or args[0] not in ALLOWED:
        raise BadInput(f"not allowed: {args[0] if args else '(nothing)'}; allowed: {allowed}")
    cmd, flags, sessions = args[0], ALLOWED[args[0]], []
    for word in args[1:]:
        if word in flags:
            continue
        if cmd != "sessions" and _SESSION.match(word) and not sessions:
            sessions.append(word)
            continue
        what = f"flags {' '.join(flags)} and a session id" if flags else "a session id"
        raise BadInput(f"not allowed from the phone: `{cmd} {word}`; `{cmd}` takes "
                       + (what if cmd != "sessions" else "nothing"))
    return args


def env_file() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or "~/.config").expanduser() / "harness" / "env"


def load_env(path: Path | None = None) -> list[str]:
    """Set the variables of the env file (KEY=VALUE lines; `#` comments, `export`, quotes) that
    are not set already; returns their names. A file others can read is refused: it holds keys."""
    path = path or env_file()
    if not path.is_file():
        return []
    st = path.stat()
    if st.st_mode & 0o077 or st.st_uid != os.getuid():
        raise BadInput(f"{path} holds keys but others can read it: `chmod 600 {path}` (and own it)")
    names = []
    for no, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise BadInput(f"{path}:{no}: not a KEY=VALUE line")
        value = m[2].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if m[1] not in os.environ:
            os.environ[m[1]] = value
            names.append(m[1])
    return names
