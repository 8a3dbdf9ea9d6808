"""The commented run spec `harness init` writes. It is rendered from RunSpec itself — each
field's description, default and example — so the template cannot drift from the model.

Fields the user gave (host, transport, workdir, launch.command) are written live; every other
field is a commented-out line showing its default or an example, and the optional sections
(model, budgets, policy, …) are present but commented out.
"""

from __future__ import annotations

import os
import shlex
import textwrap
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from .errors import BadInput
from .spec import RunSpec, format_duration, parse_duration

HEADER = """\
# harness.yaml: the run spec of `harness run` (README: "The run spec (harness.yaml)").
# Every field is listed with what it means. A commented-out line shows the field's default or
# an example, and uncommenting it puts it to use. Durations are seconds or 45s, 90m, 8h, 1h30m.
# To change a field for one session without editing this file, add -c key.sub=value to the
# command line, e.g. -c budgets.relaunches=5 -c keep_run=true
"""
COLUMN, WIDTH = 44, 116  # where the trailing comments start; the longest line
_FLAGS = {"host": "--host", "transport": "--transport", "workdir": "--workdir", "launch": "--command"}


def flow(value: Any) -> str:
    """One YAML flow value: `8h`, `[a, b]`, `{A: '0'}`, `null`."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True, sort_keys=False)
    return text.strip().removesuffix("...").strip()


def _section(f) -> type[BaseModel] | None:
    """The model of a nested section (a list of models, such as `nodes`, is a value with an example)."""
    if get_origin(f.annotation) is list:
        return None
    return next((a for a in (f.annotation, *get_args(f.annotation))
                 if isinstance(a, type) and issubclass(a, BaseModel)), None)


def _is_duration(f) -> bool:
    return any(getattr(m, "func", None) is parse_duration for m in f.metadata)


def _default(f) -> Any:
    return f.get_default(call_default_factory=True)


def _shown(f, value: Any) -> str:
    return format_duration(value) if _is_duration(f) and isinstance(value, (int, float)) else flow(value)


def _note(f, shown: str) -> str:
    """The description, plus the default when the line shows something else."""
    desc, default = f.description or "", _default(f)
    if f.is_required() or _shown(f, default) == shown:
        return desc
    return f"{desc} (default: {'none' if default is None else 'empty' if default in ([], {}) else _shown(f, default)})"


def _commented(line: str, note: str) -> list[str]:
    """`line` with `note` as a trailing comment at COLUMN, wrapped below itself when long."""
    if not note:
        return [line]
    width = max(40, WIDTH - max(COLUMN, len(line)) - 4)
    first, *rest = textwrap.wrap(note, width)
    pad = max(COLUMN, len(line))
    return [f"{line:<{pad}}  # {first}"] + [f"{'':<{pad}}  # {more}" for more in rest]


def _lines(model: type[BaseModel], given: dict, lead: str, indent: str, commented: bool, everything: bool) -> list[str]:
    """`lead`: indentation of live lines; `indent`: indentation inside a commented-out section."""
    out = []
    for name, f in model.model_fields.items():
        key, sub = f.alias or name, _section(f)
        live = not commented and (key in given or everything)
        if sub is not None:
            text, note = f"{key}:", f.description or ""
        else:
            value = given[key] if key in given else (f.examples[0] if f.examples else _default(f))
            text = f"{key}: {_shown(f, value)}"
            note = _note(f, _shown(f, value))
        top_section = model is RunSpec and sub is not None
        out += [""] * top_section + _commented(f"{lead}{'' if live else '# '}{indent}{text}", note)
        if sub is not None:
            inner = given.get(key, {})
            out += (_lines(sub, inner, lead + "  ", indent, False, everything) if live
                    else _lines(sub, inner, lead, indent + "  ", True, everything))
        out += [""] * top_section
    return out


def render(given: dict, everything: bool = False) -> str:
    """The template with the `given` values live; `everything`: every field live (for tests)."""
    body = "\n".join(_lines(RunSpec, given, "", "", False, everything)).strip() + "\n"
    while "\n\n\n" in body:
        body = body.replace("\n\n\n", "\n\n")
    return HEADER + "\n" + body


def write_template(out: Path, *, host: str | None = None, command: str = "bash run.sh", workdir: str | None = None,
                   transport: str | None = None, force: bool = False) -> str:
    """Write the commented spec to `out`; returns the line that says where it is and what next."""
    from .spec_load import clean_loc, message

    transport = transport or ("asyncssh" if host else "local")  # no host: the run is on this machine
    if workdir is None or transport == "local":
        workdir = str(Path(workdir or os.getcwd()).expanduser().resolve())
    given = {"host": host or "localhost", "transport": transport, "workdir": workdir, "launch": {"command": command}}
    try:
        RunSpec.model_validate(given)
    except ValidationError as e:
        err = e.errors()[0]
        loc = clean_loc(err["loc"])
        raise BadInput(f"{_FLAGS.get(str(loc[0]), loc[0])}: {message(err, loc)}") from None
    text = render(given)
    _write_spec(out, text, force)
    return f"wrote {out}: edit model: and budgets:, then `harness run {shlex.quote(str(out))}`"


def _write_spec(out: Path, text: str, force: bool) -> None:
    """Write a spec init made, once it is known to load (the promise: what init writes loads as it is)."""
    from .spec_load import load_text

    load_text(text, str(out), out.parent)
    if out.exists() and not force:
        raise BadInput(f"{out} exists; use --force to overwrite it")
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as e:
        raise BadInput(f"cannot write {out}: {e.strerror}") from None


def presets() -> list[str]:
    from importlib import resources

    return sorted(p.name[:-5] for p in resources.files("harness.presets").iterdir() if p.name.endswith(".yaml"))


def write_preset(out: Path, name: str, *, host: str | None = None, workdir: str | None = None,
                 transport: str | None = None, force: bool = False) -> str:
    """Write preset `name` (harness/presets/NAME.yaml: a commented spec for a real stack) with
    the host, transport and workdir filled in; returns the line that says what to do next."""
    import json
    from importlib import resources

    if name not in presets():
        raise BadInput(f"no preset {name!r}; there are: {', '.join(presets())}")
    transport = transport or ("asyncssh" if host else "local")
    if transport == "local":
        workdir = str(Path(workdir or os.getcwd()).expanduser().resolve())
    elif workdir is None:
        raise BadInput(f"--workdir: give the absolute path of the {name} checkout on {host}")
    if not str(workdir).startswith("/"):
        raise BadInput(f"--workdir: {workdir!r} is not an absolute path on the host")
    text = resources.files("harness.presets").joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    for token, value in (("@HOST@", host or "localhost"), ("@TRANSPORT@", transport), ("@WORKDIR@", workdir)):
        text = text.replace(token, json.dumps(value, ensure_ascii=False))  # a JSON string is a YAML scalar
    _write_spec(out, text, force)
    return (f"wrote {out} (preset {name}): edit launch.command for your model and data, model: and budgets:, "
            f"then `harness doctor {shlex.quote(str(out))}` and `harness run {shlex.quote(str(out))}`")
