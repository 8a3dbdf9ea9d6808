"""Loading a run spec: YAML, then `-c key.sub=value` overrides on the tree, then validation.

An error names the file, the line and the field, as yamlfile.load_model's do; when an override
caused it, the error names the override instead (its value has no line in any file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, get_args

import yaml
from pydantic import BaseModel, ValidationError

from .errors import SpecError
from .redact import redact
from .spec import RunSpec, looks_secret
from .yamlfile import Loader, node_line

_KEY = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\Z")


@dataclass
class Override:
    text: str                 # as given: "budgets.relaunches=5"
    path: tuple               # ("budgets", "relaunches"); list indexes are ints
    root: tuple               # the shallowest part of `path` the override created (or `path`)
    value: Any                # parsed as YAML
    raw: str                  # the value's text, stripped
    stringify: bool = False   # `value` was not a string where one was wanted: the text is used


def shown(text: str) -> str:
    """An override as messages may show it: a value that looks like a key is not repeated."""
    key, eq, value = text.partition("=")
    return f"{key}=<redacted>" if eq and looks_secret(value.strip()) else redact(text)


def parse_value(text: str) -> Any:
    """A YAML scalar or flow value; anything else is taken as the plain string it is
    (a command line like `echo a: b # c` stays intact)."""
    s = text.strip()
    flow = s[:1] in ("[", "{", "'", '"')
    try:
        v = yaml.load(s, Loader=Loader) if s else ""
    except yaml.YAMLError:
        if flow:
            raise ValueError("not a valid YAML value") from None
        return s
    return v if flow or not isinstance(v, (str, dict, list)) else s


def apply_override(data: dict, text: str) -> Override:
    """Set `key.sub=value` in the YAML tree `data` (in place), creating sections as needed."""
    key, eq, value = text.partition("=")
    bad = f"bad -c override {shown(text)!r}"
    key = key.strip()
    if not eq or not _KEY.match(key):
        raise SpecError(bad, None, "", "use key.sub=value")
    try:
        parsed = parse_value(value)
    except ValueError as e:
        raise SpecError(bad, None, "", f"{e}; quote the value or fix its brackets") from None
    parts, node, root = key.split("."), data, None
    path: list = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not (part.isdigit() and int(part) < len(node)):
                where = ".".join(parts[:i])
                raise SpecError(bad, None, "", f"{where} is a list of {len(node)}: give an index below it")
            part = int(part)
        elif not isinstance(node, dict):
            raise SpecError(bad, None, "", f"{'.'.join(parts[:i])} is a value, not a section")
        path.append(part)
        if last:
            if root is None and (isinstance(node, dict) and part not in node):
                root = tuple(path)
            node[part] = parsed
        else:
            if isinstance(node, dict) and node.get(part) is None:  # absent or `model: null`: a new section
                node[part] = {}
                root = tuple(path) if root is None else root
            node = node[part]
    return Override(text, tuple(path), root or tuple(path), parsed, value.strip())


def load(path: Path, overrides: Sequence[str] = ()) -> RunSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(str(path), None, "", f"cannot read: {e}") from None
    return load_text(text, str(path), path.parent, overrides)


def _parse(text: str, name: str) -> dict:
    try:
        data = yaml.load(text, Loader=Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else None
        raise SpecError(name, line, "", f"not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise SpecError(name, 1, "", "a run spec (host:, workdir:, launch:, …) is a YAML mapping")
    return data


def load_text(text: str, name: str, base: Path, overrides: Sequence[str] = ()) -> RunSpec:
    """Validate spec text (`name` for messages; playbook files resolve against `base`)."""
    tree = _parse(text, name)
    applied = [apply_override(tree, o) for o in overrides]
    ctx = {"base": str(base)}
    while True:
        try:
            return RunSpec.model_validate(tree, context=ctx)
        except ValidationError as e:
            if not _as_strings(tree, applied, e.errors()):
                err = e.errors()[0]
                break
    loc = clean_loc(err["loc"])
    field, msg = ".".join(map(str, loc)) or "(top)", message(err, loc)
    culprit = _culprit(applied, loc)
    if culprit:
        raise SpecError(f"-c {shown(culprit.text)}", None, field, msg)
    raise SpecError(name, node_line(yaml.compose(text, Loader=Loader), loc), field, msg)


def _as_strings(tree: dict, applied: list[Override], errors: list[dict]) -> bool:
    """`-c launch.env.N=1` means the string "1" where a string is wanted: retry with the text."""
    changed = False
    for err in errors:
        for o in applied:
            if (err["type"] == "string_type" and not isinstance(o.value, str) and not o.stringify
                    and clean_loc(err["loc"]) == o.path):
                _set(tree, o.path, o.raw)
                o.stringify = changed = True
    return changed


def _set(tree, path: tuple, value) -> None:
    for part in path[:-1]:
        tree = tree[part]
    tree[path[-1]] = value


def _culprit(applied: list[Override], loc: tuple) -> Override | None:
    """The override that wrote at or above the error's place (the last one, as it won)."""
    return next((o for o in reversed(applied) if loc[:len(o.root)] == o.root), None)


def clean_loc(loc: tuple) -> tuple:
    """The error's place as YAML keys (pydantic's validator and dict-key markers dropped)."""
    drop = lambda x: isinstance(x, str) and (x.startswith(("function-", "literal[")) or x == "[key]")  # noqa: E731
    return tuple(x for x in loc if not drop(x))


def message(err: dict, loc: tuple) -> str:
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        known = _fields_at(loc[:-1])
        return f"unknown field; known here: {', '.join(known)}" if known else msg
    if err["type"] == "string_type" and isinstance(err.get("input"), bool):
        return f"{msg}; quote it (YAML reads yes/no/true/false unquoted as a boolean)"
    if err["type"] == "string_type" and isinstance(err.get("input"), (int, float)):
        return f'{msg}; quote it: "{err["input"]}"'
    return msg


def _fields_at(loc: tuple) -> list[str]:
    """The YAML keys a section of RunSpec accepts."""
    cls: Any = RunSpec
    for key in loc:
        f = next((f for n, f in cls.model_fields.items() if key in (n, f.alias)), None)
        if f is None:
            return []
        cls = next((a for a in (f.annotation, *get_args(f.annotation)) if isinstance(a, type)
                    and issubclass(a, BaseModel)), None)
        if cls is None:
            return []
    return [f.alias or n for n, f in cls.model_fields.items()]
