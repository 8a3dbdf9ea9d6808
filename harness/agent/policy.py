"""The policy every agent tool call passes before it touches the host.

It is a guard against accidents by a well-meaning model, not a sandbox: a model set on doing
harm can write through a `python -c` script, a Makefile or a program it runs. What it refuses,
with a one-line reason the model reads: recursive `rm` outside the workdir (or of the whole
workdir), reboot/shutdown/halt, `mkfs`/`wipefs`, writes to devices (`dd of=/dev/…`,
`> /dev/sda`), fork bombs, a download piped into an interpreter, `git push`, `sudo`/`su`,
`pkill`/`killall`/`fuser -k`, `kill` of anything but literal pids (Tools then checks each pid
carries HARNESS_RUN_ID=<run id>), `chmod -R`/`chown -R` outside the workdir, the spec's `deny`
regexes, and any write it can see outside the workdir ∪ `writable` or inside `protected`.

Writes it can see (shlex, best effort): redirections (`>`, `>>`, `&>`), `tee`, `cp`/`mv`/
`install`/`rsync`/`ln` destinations (and `mv` sources), `sed -i`/`perl -i` files, `truncate`,
`touch`, `mkdir`, `rm`/`rmdir`/`unlink`/`shred`, `chmod`/`chown`/`chgrp`, `dd of=`, `find
-delete`/`-exec rm` roots, `curl -o`/`wget -O`/`sort -o`; inside `sh -c`, `eval`, `$(…)`,
backticks and here-documents fed to a shell too; `cd` is followed. What it cannot see: writes
made by programs (`python -c`, scripts, make), paths held in variables (`> "$f"` is not
checked; `rm -r "$d"` is refused as uncheckable), aliases and functions defined on the fly.
check_command is pure and judges paths lexically; check_write(s) resolves them ON THE HOST
with `realpath -m`, following symlinks, so `link/f` with link -> /etc is caught.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import BadInput
from .shell import HARMLESS, SHELLS, WRITE_OPS, Cmd, commands, place, short, split_args, writes


@dataclass(frozen=True)
class Policy:
    """What the agent may touch on the host (from the spec's agent policy and the session's run dir)."""

    workdir: str                      # absolute path on the host; bash runs here; writes allowed under it
    writable: tuple[str, ...] = ()    # more writable dirs (the run dir)
    protected: tuple[str, ...] = ()   # read-only paths (checkpoints, datasets), absolute or relative to workdir
    deny: tuple[str, ...] = ()        # extra regexes of refused commands (from the spec)

    def __post_init__(self):
        if not self.workdir.startswith("/"):
            raise BadInput(f"policy: workdir {self.workdir!r} must be an absolute path on the host")
        object.__setattr__(self, "workdir", posixpath.normpath(self.workdir))  # frozen: normalise once
        for name in ("writable", "protected", "deny"):  # lists from YAML are welcome
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for p in self.deny:
            try:
                re.compile(p)
            except re.error as e:
                raise BadInput(f"policy.deny: {p!r} is not a valid regular expression ({e}); fix it in the spec")

    def roots(self) -> list[str]:
        """Where writes may go: the workdir, then the writable dirs."""
        return [self.workdir, *(posixpath.join(self.workdir, w) for w in self.writable)]

    def guarded(self) -> list[str]:
        """The protected paths, absolute."""
        return [posixpath.join(self.workdir, p) for p in self.protected]


class Target(NamedTuple):
    raw: str            # the path as the command spells it
    path: str | None    # where it is: absolute or `~/…` (the host resolves it); None: a variable decides
    kind: str           # write | tree (everything under it: chmod -R, find -delete) | delete (rm -r)
    label: str          # what writes it, for the reason: writing, rm -r, chmod -R, sed -i …


_INTERP = re.compile(r"python[\d.]*|perl|ruby|node|php")
_FORK_BOMB = re.compile(r"(?:function\s+([\w:.-]+)\s*(?:\(\s*\))?|([\w:.-]+)\s*\(\s*\))\s*\{([^}]*)\}")
_FETCH_EXEC = re.compile(r"(?:\b(?:sh|bash|dash|zsh|ksh|python[\d.]*|perl|ruby|node|eval|source)|(?:^|[\s;&|])\.)"
                         r"\s+(?:-\w+\s+)*[\"']?(?:\$\(|`|<\()\s*(?:curl|wget)\b")


def _refuse(what: str, why: str) -> str:
    return f"refused: `{what}` — {why}"


def _targets(cmds: list[Cmd]) -> list[Target]:
    out = []
    for cmd in cmds:
        found = [(t, "write", "writing") for op, t in cmd.redirects
                 if op in WRITE_OPS and t and not (op == ">&" and (t.isdigit() or t == "-"))]
        for raw, kind, label in found + (writes(cmd.argv) if cmd.argv else []):
            if not HARMLESS.match(raw):
                out.append(Target(raw, place(cmd.base, raw), kind, label))
    return out


def write_targets(policy: Policy, command: str) -> list[Target]:
    """The files `command` visibly writes, for check_writes. Pure; [] when it cannot be parsed."""
    try:
        return _targets(commands(command, policy.workdir))
    except ValueError:
        return []


def _kill(args: list[str], via: str | None) -> tuple[str | None, list[int]]:
    """(why this kill is refused, the literal pids it names: Tools checks they belong to the run)."""
    if via == "xargs":
        return "kill through xargs: the pids cannot be checked; pass literal pids", []
    if args[:1] in (["-l"], ["-L"], ["--list"]):
        return None, []
    i = 2 if args[:1] in (["-s"], ["-n"]) else int(len(args) > 1 and args[0].startswith("-") and args[0] != "--")
    i += args[i:i + 1] == ["--"]
    pids = []
    for a in args[i:]:
        if re.fullmatch(r"-?\d+", a) and int(a) <= 0:
            return f"`{a}` signals a process group or every process you own; kill pids of this run only", []
        if a.isdigit():
            pids.append(int(a))
        elif not re.fullmatch(r"%\S*|\$!", a):  # the jobs of this very command are its own
            return (f"`{a}` is not a literal pid; the harness checks each pid belongs to this run, "
                    "so find them first (pgrep -a, ps) and pass the numbers"), []
    return None, pids


def kill_pids(command: str) -> list[int]:
    """The literal pids `command` kills. Pure."""
    try:
        cmds = commands(command, None)
    except ValueError:
        return []
    return [p for c in cmds if c.name == "kill" for p in _kill(c.argv[1:], c.via)[1]]


def _git_sub(args: list[str]) -> str:
    it = iter(args)
    for a in it:
        if a in ("-C", "-c", "--git-dir", "--work-tree", "--namespace"):
            next(it, None)
        elif not a.startswith("-"):
            return a
    return ""


def _refusal(cmd: Cmd) -> str | None:
    name, args, what = cmd.name, cmd.argv[1:], " ".join(cmd.argv)[:80]
    if name in ("sudo", "su", "doas", "pkexec"):
        return _refuse(name, "the harness never escalates privileges; work as the current user")
    if (name in ("reboot", "shutdown", "poweroff", "halt") or (name in ("init", "telinit") and args[:1] in (["0"], ["6"]))
            or (name == "systemctl" and {"reboot", "poweroff", "halt", "kexec", "soft-reboot", "rescue",
                                         "emergency"} & set(args))):
        return _refuse(what, "the harness never reboots, halts or powers off the host")
    if name.startswith("mkfs") or name in ("mke2fs", "mkswap", "wipefs"):
        return _refuse(name, "formatting or wiping a filesystem is never allowed")
    if name in ("pkill", "killall", "killall5") or (name == "fuser" and short(args, "k")):
        return _refuse(name, "it picks processes by name and can hit ones the run does not own; find the pids "
                             "(pgrep -a, ps) and `kill` those of this run")
    if cmd.via == "xargs" and ((name == "rm" and short(args, "rR")) or (name in ("chmod", "chown") and short(args, "R"))):
        return _refuse(f"xargs {what}", "its paths come from stdin and cannot be checked; name them, "
                                        "or use `find DIR … -delete`")
    if name == "kill" and (why := _kill(args, cmd.via)[0]):
        return _refuse(what, why)
    if name == "git" and _git_sub(args) == "push":
        return _refuse("git push", "the harness never publishes changes; the ledger keeps your edits "
                                   "and the operator decides what to push")
    return None


def _runs_stdin(argv: list[str]) -> bool:
    """Whether this interpreter takes its program from stdin (`sh`, `bash -s`, `python3 -`)."""
    name = posixpath.basename(argv[0])
    if name not in SHELLS and not _INTERP.fullmatch(name):
        return False
    flags, pos, _ = split_args(argv[1:])
    if short(flags, "c" if name in SHELLS else "cm" if name.startswith("python") else "eErp"):
        return False  # the program is an argument; stdin is data (curl … | python3 -m json.tool)
    return not pos or pos[0] == "-" or (name in SHELLS and short(flags, "s"))


def _piped_download(cmds: list[Cmd]) -> bool:
    pipes: dict[int, list[Cmd]] = {}
    for c in cmds:
        pipes.setdefault(c.pipe, []).append(c)
    for group in pipes.values():
        first = next((i for i, c in enumerate(group) if c.name in ("curl", "wget")), None)
        if first is not None and any(c.argv and _runs_stdin(c.argv) for c in group[first + 1:]):
            return True
    return False


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _judge(t: Target, real: str, roots: list[str], guarded: list[str]) -> str | None:
    """Why writing `t`, at normalised path `real`, is refused, or None."""
    same = real in (posixpath.normpath(t.raw), posixpath.normpath(t.path or ""))
    what = t.label + ("" if t.label.endswith("=") else " ") + t.raw + ("" if same else f"`, which resolves to `{real}")
    if HARMLESS.match(real):
        return None
    if real.startswith("/dev/"):
        return _refuse(what, "writing to a device is never allowed")
    if g := next((g for g in guarded if _inside(real, g)), None):
        return _refuse(what, f"{g} is protected: reading it is fine, changing it is not")
    root = next((r for r in roots if _inside(real, r)), None)
    if root is None:
        return _refuse(what, f"it is outside {' and '.join(roots)}; change files only inside the workdir")
    if t.kind == "delete" and real == root:
        return _refuse(what, f"it deletes all of {root}; delete what is inside it by name")
    if t.kind != "write" and (g := next((g for g in guarded if _inside(g, real)), None)):
        return _refuse(what, f"it reaches into {g}, which is protected; aim it at directories without protected paths")
    return None


def _lexical(policy: Policy, t: Target) -> str | None:
    """The verdict on `t` from its spelling alone (symlinks are the host's to resolve)."""
    if t.path is None:
        return None if t.kind == "write" else _refuse(
            f"{t.label} {t.raw}", f"the harness cannot tell where `{t.raw}` points; spell the path out")
    norm = re.sub(r"^/+", "/", posixpath.normpath(t.path))
    if not norm.startswith("/"):  # ~/…: the host knows where home is; deleting home itself is refused here
        return None if t.kind == "write" or norm.startswith("~/") else _refuse(
            f"{t.label} {t.raw}", "it deletes your home directory or what holds it")
    roots = [posixpath.normpath(r) for r in policy.roots()]
    return _judge(t, norm, roots, [posixpath.normpath(g) for g in policy.guarded()])


def check_command(policy: Policy, command: str) -> str | None:
    """Why `command` is refused (one line for the model), or None. Pure: paths are judged by their
    spelling; check_writes(write_targets(…)) then resolves them on the host."""
    for p in policy.deny:
        if re.search(p, command):
            return _refuse(command[:80], f"the spec's deny pattern `{p}` forbids it")
    for m in _FORK_BOMB.finditer(command):
        if re.search(rf"(?<![\w:.-]){re.escape(m.group(1) or m.group(2))}\s*[|&]", m.group(3)):
            return _refuse(m.group(0)[:60], "a function that spawns itself is a fork bomb; it exhausts the host")
    if _FETCH_EXEC.search(command):
        return _refuse("curl … | sh", "running a download nobody read is never allowed; save it in the workdir, "
                                      "read it, then run it")
    try:
        cmds = commands(command, policy.workdir)
    except ValueError as e:
        return f"refused: the command cannot be parsed ({e}); fix its quoting"
    for cmd in cmds:
        if cmd.argv and (why := _refusal(cmd)):
            return why
    if _piped_download(cmds):
        return _refuse("curl … | sh", "piping a download into an interpreter runs code nobody read; "
                                      "save it in the workdir, read it, then run it")
    return next((why for t in _targets(cmds) if (why := _lexical(policy, t))), None)


def _word(path: str) -> str:
    """`path` for the host's shell, a leading `~` expanded there."""
    return '"$HOME"' + shlex.quote(path[1:]) if path.startswith("~/") else '"$HOME"' if path == "~" \
        else shlex.quote(path)


async def _resolve(transport, policy: Policy, targets: list[Target]) -> tuple[str | None, list[str]]:
    """(why one of `targets` is refused or None, their real paths). One round trip to the host."""
    for t in targets:
        if why := _lexical(policy, t):
            return why, []
    known = [t for t in targets if t.path is not None]
    if not known:
        return None, []
    args = [*policy.roots(), *policy.guarded(), *(t.path for t in known)]
    r = await transport.run("realpath -m -z -- " + " ".join(map(_word, args)), cwd=policy.workdir,
                            timeout=30, check=True)  # -m: missing parts are fine; symlinks are followed
    real = r.stdout.split("\0")
    n, g = len(policy.roots()), len(policy.guarded())
    paths = real[n + g:n + g + len(known)]
    why = next((why for t, p in zip(known, paths) if (why := _judge(t, p, real[:n], real[n:n + g]))), None)
    return why, paths


async def check_writes(transport, policy: Policy, targets: list[Target]) -> str | None:
    """Why writing one of `targets` is refused once the host resolved them, or None."""
    return (await _resolve(transport, policy, targets))[0] if targets else None


async def check_write(transport, policy: Policy, path: str) -> str | None:
    """Why writing `path` (relative to the workdir, absolute or `~/…`) is refused, or None."""
    return (await resolve_write(transport, policy, path))[0]


async def resolve_write(transport, policy: Policy, path: str) -> tuple[str | None, str]:
    """(why writing `path` is refused or None, the real path on the host to write)."""
    t = Target(path, place(policy.workdir, path), "write", "writing")
    if t.path is None:
        return _refuse(f"writing {path}", "the harness cannot tell where it points; spell the path out"), path
    why, real = await _resolve(transport, policy, [t])
    return why, (real[0] if real else path)
