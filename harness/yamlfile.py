"""Load a YAML file into a pydantic model; an error names the file, the line and the field."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import PlaybookError

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster
M = TypeVar("M", bound=BaseModel)


def node_line(node: yaml.Node | None, loc: tuple) -> int | None:
    """Line (1-based) of the YAML node at a pydantic error location, as deep as it resolves."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            nxt = node.value[key]
        else:
            nxt = None
        if nxt is None:
            break
        node, line = nxt, nxt.start_mark.line + 1
    return line


def load_model(path: Path, model: type[M], what: str, error=PlaybookError) -> M:
    """Parse `path` as YAML and validate it as `model`; `what` names the kind of file in errors."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise error(name, None, "", f"cannot read: {e}") from None
    try:
        data = yaml.load(text, Loader=Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise error(name, mark.line + 1 if mark else None, "", f"not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise error(name, 1, "", f"a {what} is a YAML mapping")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith(("function-", "literal["))))
        node = yaml.compose(text, Loader=Loader)  # only now: line numbers for the message
        msg = err["msg"].removeprefix("Value error, ")
        raise error(name, node_line(node, loc), ".".join(str(x) for x in loc) or "(top)", msg) from None
