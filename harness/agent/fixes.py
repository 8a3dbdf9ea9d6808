"""Deterministic fixes declared in playbooks, applied without a model call.

    r = await apply_fix(transport, sig.fix, workdir="/w", env=env, unset=unset)
    if r.applied: env, unset = r.env, r.unset      # the launch environment from now on

A fix that cannot be applied (text not found, key already set, file missing, a path outside the
workdir, a YAML file that cannot be edited safely) is not an error: it comes back with
`applied=False` and a one-line description of why, and the controller hands the failure to the
agent instead. Files are read and written on the host through the Transport.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import yamledit
from ..redact import redact
from ..remote.transport import ENV_NAME

if TYPE_CHECKING:
    from ..playbook import Fix

_SHOW = 60  # characters of a replaced text shown in a description


@dataclass(frozen=True)
class FixResult:
    applied: bool  # False when the fix could not be applied; `description` says why
    description: str  # one line for the journal / report
    env: dict[str, str]  # the launch env to use from now on (set_env adds/overrides)
    unset: list[str]  # the names to unset from now on (unset_env adds; set_env removes the name)
    files: list[str] = field(default_factory=list)  # files changed, relative to the workdir
    already: bool = False  # not applied because it is already in place (e.g. applied before a crash)


async def apply_fix(transport, fix: "Fix", *, workdir: str, env: dict[str, str], unset: list[str]) -> FixResult:
    """Apply one playbook fix. Never raises for a fix that does not fit the workdir."""
    env, unset = dict(env), list(unset)

    def result(applied: bool, description: str, files: list[str] | None = None, already: bool = False) -> FixResult:
        return FixResult(applied, redact(description), env, unset, files or [], already)

    if fix.kind == "cleanup_retry":
        return result(True, "clean up and retry")  # the controller does the cleanup
    if fix.kind == "set_env":
        return _set_env(fix.name, fix.value, env, unset, result)
    if fix.kind == "unset_env":
        return _unset_env(fix.names, env, unset, result)
    path, rel = _inside(workdir, fix.file)
    if path is None:
        return result(False, f"{fix.file}: refused, outside the workdir {workdir}")
    try:
        text = (await transport.read(path)).decode("utf-8")
    except FileNotFoundError:
        return result(False, f"{rel}: no such file in the workdir")
    except UnicodeDecodeError:
        return result(False, f"{rel}: not UTF-8 text, not changed")
    new_text, description = edit_text(fix.model_dump(), text, rel)
    if new_text is None or new_text == text:
        return result(False, description, already=new_text == text)
    await transport.write(path, new_text.encode("utf-8"))  # keeps the file's mode
    return result(True, description, [rel])


def edit_text(fix: dict, text: str, rel: str) -> tuple[str | None, str]:
    """A file fix (replace, set_yaml) applied to a file's text: (the new text, a description);
    the text itself when the fix is already in place, None when it cannot be applied."""
    if fix["kind"] == "replace":
        return _replace(text, fix["old"], fix["new"], rel)
    return _set_yaml(text, fix["key"], fix["value"], rel)


def _inside(workdir: str, file: str) -> tuple[str | None, str]:
    """The file's absolute path and its path relative to the workdir; None when it lies outside.
    Lexical only (the host is remote): `..` cannot climb out; the playbook is trusted input."""
    root = posixpath.normpath(workdir)
    path = posixpath.normpath(posixpath.join(root, file))
    if path == root or not path.startswith(root.rstrip("/") + "/"):
        return None, file
    return path, posixpath.relpath(path, root)


def _set_env(name: str, value: str, env: dict, unset: list, result) -> FixResult:
    if not ENV_NAME.match(name):
        return result(False, f"set_env: {name!r} is not a variable name")
    if env.get(name) == value and name not in unset:
        return result(False, f"{name} is already {value} for the run", already=True)
    env[name] = value
    unset[:] = [n for n in unset if n != name]
    return result(True, f"set {name}={value} for the run")


def _unset_env(names: list[str], env: dict, unset: list, result) -> FixResult:
    bad = [n for n in names if not ENV_NAME.match(n)]
    if bad:
        return result(False, f"unset_env: {', '.join(map(repr, bad))} not variable names")
    changed = [n for n in dict.fromkeys(names) if n not in unset or n in env]
    if not changed:
        return result(False, f"{', '.join(names)} already unset for the run", already=True)
    for n in changed:
        env.pop(n, None)
    unset += [n for n in changed if n not in unset]
    return result(True, f"unset {', '.join(changed)} for the run")


def _short(text: str) -> str:
    s = repr(text)
    return s if len(s) <= _SHOW else s[:_SHOW - 3] + "..."


def _replace(text: str, old: str, new: str, rel: str) -> tuple[str | None, str]:
    """(new text, description); the text itself when already in place, None when not applicable."""
    if old in new:  # count and replace only the `old`s outside the `new`s: applying twice is a no-op
        pieces = text.split(new)
        count = sum(p.count(old) for p in pieces)
        out = new.join(p.replace(old, new) for p in pieces)
    else:
        count, out = text.count(old), text.replace(old, new)
    if count == 0:
        if new in text:
            return text, f"{rel}: already applied ({_short(new)} is there)"
        return None, f"{rel}: text not found: {_short(old)}"
    places = "1 place" if count == 1 else f"{count} places"
    return out, f"{rel}: {_short(old)} -> {_short(new)} ({places})"


def _set_yaml(text: str, key: str, value: str, rel: str) -> tuple[str | None, str]:
    """(new text, description); the text itself when already set, None when it cannot be set."""
    try:
        if yamledit.is_set(text, key, value):
            return text, f"{rel}: {key} already set to {value}"
        out, old = yamledit.set_key(text, key, value)
    except ValueError as e:  # the file or the value cannot be edited safely
        return None, f"{rel}: {e}"
    return out, f"{rel}: {key} {old if old is not None else '(new)'} -> {value}"
