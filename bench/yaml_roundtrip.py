"""Does a round-trip YAML library set one key of a config as harness.yamledit does? The measured
cases behind the README's choice to keep yamledit for declared `set_yaml` fixes.

    pip install ruamel.yaml; python bench/yaml_roundtrip.py

For each case it sets one key with ruamel.yaml (round-trip mode, quotes preserved, no wrapping)
and with harness.yamledit, and prints the lines each changed besides the key's own, and whether
PyYAML (what OmegaConf and the frameworks' configs are read with: YAML 1.1) loads the intended data.
"""

from __future__ import annotations

import difflib
import io
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import yamledit  # noqa: E402
from harness.demo import prepare  # noqa: E402


def with_ruamel(text: str, key: str, value: str) -> str:
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    y = YAML()
    y.preserve_quotes, y.width = True, 1 << 16
    data = y.load(text) or CommentedMap()
    node = data
    for part in key.split(".")[:-1]:
        node = node.setdefault(part, CommentedMap())
    node[key.split(".")[-1]] = yaml.safe_load(value)
    buf = io.StringIO()
    y.dump(data, buf)
    return buf.getvalue()


def other_lines(before: str, after: str, key: str) -> list[str]:
    """Lines changed that do not carry the key's last part (what else the edit touched)."""
    last = key.split(".")[-1]
    return [ln for ln in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if ln[:1] in "+-" and ln[:3] not in ("+++", "---") and last not in ln
            and not any(f"{p}:" in ln for p in key.split(".")[:-1])]


def intended(before: str, after: str, key: str, value: str) -> bool:
    want = yaml.safe_load(before) or {}
    node = want
    for part in key.split(".")[:-1]:
        node = node.setdefault(part, {})
    node[key.split(".")[-1]] = yaml.safe_load(value)
    try:
        return yaml.safe_load(after) == want
    except yaml.YAMLError:
        return False


def main() -> None:
    config = (prepare(Path(tempfile.mkdtemp())) / "config.yaml").read_text()
    cases = [
        ("minichain config: token_margin", config, "rollout.token_margin", "16384"),
        ("minichain config: a new no_proxy", config, "ray_init.runtime_env.env_vars.no_proxy", "127.0.0.1,localhost"),
        ("a key spelled like a YAML 1.1 bool", "a: 1\n", "flags.no", "1"),
        ("a string value spelled like a bool", "a: 1\n", "a", "'off'"),
        ("null written as null elsewhere", "a: null  # none\nb: 1\n", "b", "2"),
    ]
    for name, text, key, value in cases:
        for lib, fn in (("ruamel.yaml", with_ruamel), ("yamledit", lambda t, k, v: yamledit.set_key(t, k, v)[0])):
            try:
                out = fn(text, key, value)
            except Exception as e:  # noqa: BLE001 - a refusal is a result here
                print(f"{name:<40} {lib:<12} refused: {e}")
                continue
            others = other_lines(text, out, key)
            ok = intended(text, out, key, value)
            print(f"{name:<40} {lib:<12} loads as intended: {'yes' if ok else 'NO '}; other lines changed: "
                  f"{len(others)}" + (f"  {others[:2]}" if others else ""))


if __name__ == "__main__":
    main()
