"""Set one key of a block-style YAML config in place, keeping its comments, blank lines and layout.

    text, old = set_key(text, "rollout.token_margin", "16384")   # old: "2048" as written; None if added

`value` is YAML scalar text ('16384' is an int, 'false' a bool, '127.0.0.1,localhost' a string);
it is written so that a YAML loader reads back exactly that scalar. A missing key is added
after the last child of its parent, at the children's indentation; missing parents are created.
Only what people write in configs is edited: nested block mappings. Flow mappings on the path,
anchors and aliases, and multi-document files are refused, and every edit is checked by loading
the result (the key has the new value, everything else is unchanged): any doubt is a ValueError,
never a broken file.
"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

# The pure-Python loader: its marks index characters of the text, which the edits rely on.
_Loader = yaml.SafeLoader
_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"
_COMMENT = re.compile(r"([ \t]+)(#.*)")
_RAW_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")
_MISSING = object()
Edit = tuple[int, int, str]  # replace text[start:end] with the string


def set_key(text: str, dotted_key: str, value: str) -> tuple[str, str | None]:
    """The text with `dotted_key` set to the scalar `value`, and the old value as written
    (None when the key was absent). ValueError when the key cannot be set safely."""
    parts = _split(dotted_key)
    new = parse_value(value)
    try:
        root = _compose(text)
        before = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise ValueError(f"cannot set {dotted_key} safely: not one valid YAML document ({_problem(e)})") from None
    edits, old = _plan(text, root, parts, _render(value, new), dotted_key)
    out = _apply(text, edits)
    _verify(before, out, parts, new, dotted_key)
    return out, old


def is_set(text: str, dotted_key: str, value: str) -> bool:
    """Whether `dotted_key` already loads as the scalar `value` (so setting it changes nothing).
    ValueError when the text is not valid YAML (or not one document) or `value` not a scalar."""
    try:
        node: Any = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise ValueError(f"cannot set {dotted_key} safely: not one valid YAML document ({_problem(e)})") from None
    for part in _split(dotted_key):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return same(node, parse_value(value))


def parse_value(value: str) -> Any:
    """The scalar a fix's value text stands for; ValueError when it is not one YAML scalar."""
    try:
        v = yaml.load(value, Loader=_Loader)
    except yaml.YAMLError as e:
        raise ValueError(f"value {value!r} is not a YAML scalar ({_problem(e)})") from None
    if isinstance(v, (dict, list)):
        raise ValueError(f"value {value!r} is a YAML {type(v).__name__}, not a scalar")
    return v


def same(a: Any, b: Any) -> bool:
    """Equal as loaded YAML, strictly: 1, 1.0 and true differ; NaN equals NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


# ---------------------------------------------------------------- reading


def _split(dotted_key: str) -> list[str]:
    parts = dotted_key.split(".")
    if not all(p.strip() for p in parts):
        raise ValueError(f"cannot set {dotted_key!r}: empty part in the dotted key")
    return parts


def _problem(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}" if mark else ""
    return " ".join(f"{getattr(e, 'problem', None) or e}".split()) + where


def _compose(text: str) -> Node | None:
    """The document's node tree, after refusing what a text edit cannot handle safely."""
    docs = 0
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
            raise ValueError("cannot set a key safely in a file with anchors or aliases")
        docs += isinstance(ev, yaml.DocumentStartEvent)
    if docs > 1:
        raise ValueError("cannot set a key safely in a multi-document file")
    return yaml.compose(text, Loader=_Loader)


def _end(node: Node):
    """The mark where a node's text ends: a block collection ends with its last leaf, not at
    the next token (which may lie past blank lines and comments)."""
    if isinstance(node, ScalarNode) or node.flow_style or not node.value:
        return node.end_mark
    last = node.value[-1]
    return _end(last[1] if isinstance(node, MappingNode) else last)


def _after_line(text: str, mark) -> int:
    if mark.column == 0:  # a block scalar ends at the start of the next line
        return mark.index
    nl = text.find("\n", mark.index)
    return len(text) if nl < 0 else nl + 1


def _step(root: Node | None) -> int:
    """The file's indentation step: taken from its first nested block mapping, else 2."""
    todo = [root] if isinstance(root, MappingNode) else []
    while todo:
        m = todo.pop(0)
        for k, v in m.value:
            if isinstance(v, MappingNode) and not v.flow_style and v.value:
                step = v.value[0][0].start_mark.column - k.start_mark.column
                if step > 0:
                    return step
                todo.append(v)
    return 2


# ---------------------------------------------------------------- planning the edit


def _plan(text: str, root: Node | None, parts: list[str], rendered: str, key: str) -> tuple[list[Edit], str | None]:
    def refuse(why: str):
        return ValueError(f"cannot set {key} safely: {why}")

    node, depth = root, 0
    while True:
        where = ".".join(parts[:depth]) or "the document"
        if node is None:  # an empty document (nothing but comments, maybe)
            return [_insert(text, len(text), 0, parts, _step(root), rendered)], None
        if not isinstance(node, MappingNode):
            raise refuse(f"{where} is not a mapping")
        if node.flow_style:
            raise refuse(f"{where} is a flow mapping ({{...}})")
        hits = [(k, v) for k, v in node.value
                if isinstance(k, ScalarNode) and k.tag == _STR and k.value == parts[depth]]
        if len(hits) > 1:
            raise refuse(f"{'.'.join(parts[:depth + 1])} appears {len(hits)} times")
        if not hits:
            indent = node.value[0][0].start_mark.column
            return [_insert(text, _after_line(text, _end(node)), indent, parts[depth:], _step(root), rendered)], None
        k, v = hits[0]
        if depth == len(parts) - 1:
            return _replace(text, v, rendered, refuse)
        if isinstance(v, ScalarNode) and v.tag == _NULL:  # `parent:` with no children yet
            step = _step(root)
            drop = (v.start_mark.index, v.end_mark.index, "")  # an explicit `null`/`~` goes
            at = _after_line(text, v.end_mark)
            return [drop, _insert(text, at, k.start_mark.column + step, parts[depth + 1:], step, rendered)], None
        node, depth = v, depth + 1


def _replace(text: str, v: Node, rendered: str, refuse) -> tuple[list[Edit], str]:
    """Replace a scalar value in its line; a trailing comment keeps its column when it fits."""
    if not isinstance(v, ScalarNode):
        raise refuse(f"its value is a {'mapping' if isinstance(v, MappingNode) else 'list'}, not a scalar")
    if v.style in ("|", ">") or v.start_mark.line != v.end_mark.line:
        raise refuse("its value spans several lines")
    start, end = v.start_mark.index, v.end_mark.index
    old = text[start:end]
    new = rendered if old or text[start - 1] in " \t" else " " + rendered  # `key:` with no value
    line_start = text.rfind("\n", 0, start) + 1
    eol = text.find("\n", end)
    m = _COMMENT.match(text, end, len(text) if eol < 0 else eol)
    if m:
        column = end - line_start + len(m.group(1))
        width = start - line_start + len(new)
        return [(start, m.start(2), new + " " * max(column - width, 1))], old
    return [(start, end, new)], old


def _insert(text: str, at: int, indent: int, parts: list[str], step: int, rendered: str) -> Edit:
    nl = "\r\n" if "\r\n" in text else "\n"
    lines = [" " * (indent + i * step) + _key_text(p) + ":" for i, p in enumerate(parts)]
    lines[-1] += " " + rendered
    block = nl.join(lines) + nl
    if at == len(text) and text and not text.endswith("\n"):
        block = nl + block
    return (at, at, block)


def _apply(text: str, edits: list[Edit]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text


# ---------------------------------------------------------------- writing values


def _loads_as(text: str) -> Any:
    try:
        return yaml.load(f"k: {text}", Loader=_Loader)["k"]
    except (yaml.YAMLError, TypeError, KeyError):
        return _MISSING


def _render(value: str, v: Any) -> str:
    """The value as the person wrote it when that reads back the same in a block mapping,
    else quoted (strings) or in YAML's own spelling (other scalars)."""
    text = value.strip()
    if text and "\n" not in text and "#" not in text and same(_loads_as(text), v):
        return text
    if isinstance(v, str):
        return _quote(v)
    return yaml.safe_dump(v, width=float("inf")).splitlines()[0]


def _quote(s: str) -> str:
    """A YAML double-quoted scalar: JSON's escapes, plus \\u escapes for what YAML reads as a
    line break or refuses to read raw (C1 controls, U+2028/9, surrogates, U+FFFE/F)."""
    body = json.dumps(s, ensure_ascii=False)[1:-1]
    return '"' + _RAW_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", body) + '"'


def _key_text(part: str) -> str:
    try:
        plain = "#" not in part and same(yaml.load(f"{part}: 1", Loader=_Loader), {part: 1})
    except yaml.YAMLError:
        plain = False
    return part if plain else _quote(part)


def _verify(before: Any, out: str, parts: list[str], new: Any, key: str) -> None:
    expected = copy.deepcopy(before) if isinstance(before, dict) else {}
    node = expected
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = new
    try:
        after = yaml.load(out, Loader=_Loader)
    except yaml.YAMLError as e:
        raise ValueError(f"cannot set {key} safely: the edit would break the file ({_problem(e)})") from None
    if not same(after, expected):
        raise ValueError(f"cannot set {key} safely: the edited file would not load as intended")
