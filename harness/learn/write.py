"""The learned playbook file: `extends:` the session's playbooks, one entry per validated proposal
(each with `evidence: session <id> attempt <n>`), merged into the file when it exists already
(a nightly `harness learn -o team/pangu-learned.yaml` grows one file), written whole or not at all.
"""

from __future__ import annotations

import datetime
import os
import tempfile
from pathlib import Path

import yaml

from ..errors import BadInput
from ..playbook import LEARNED, read_file, shipped_dir
from .propose import Proposal


def render(proposals: list[Proposal], out: Path, extends: list[str], sessions: list[str]) -> str:
    """The YAML text of the learned playbook `out` (its existing entries kept unless re-learned)."""
    name = out.stem
    old = read_file(out) if out.is_file() else None
    if old is not None and not old.description.startswith("Learned by harness learn"):
        raise BadInput(f"{out} is a playbook harness learn did not write; give another -o file")
    sigs = {s.id: s.model_dump(by_alias=True, exclude_defaults=True) for s in (old.signatures if old else [])}
    rules = {r.id: r.model_dump(exclude_defaults=True) for r in (old.metric_rules if old else [])}
    for p in proposals:
        (rules if p.kind == "rule" else sigs)[p.entry["id"]] = p.entry
    froms = sorted({*(_sessions(old) if old else []), *sessions})
    shown = ", ".join(froms[-5:]) + (f" and {len(froms) - 5} earlier" if len(froms) > 5 else "")
    data = {"name": name,
            "description": f"Learned by harness learn from session(s) {shown}; "
                           f"updated {datetime.date.today().isoformat()}. Review before sharing.",
            "extends": [e for e in dict.fromkeys([*(old.extends if old else []), *extends])
                        if Path(e).resolve() != out.resolve()],  # a session that used this file: not itself
            "signatures": list(sigs.values()), "metric_rules": list(rules.values())}
    return yaml.dump({k: v for k, v in data.items() if v}, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                     width=100)


def check_target(out: Path) -> None:
    """Refuse a file inside the installed package or in a directory that does not exist."""
    target = out.resolve()
    package = Path(__file__).resolve().parents[1]
    if target.is_relative_to(package) or target.is_relative_to(shipped_dir().resolve()):
        raise BadInput(f"{out}: inside the installed harness ({package}); write learned playbooks elsewhere, "
                       "e.g. ~/.config/harness/playbooks/ or a team checkout on $HARNESS_PLAYBOOKS")
    if not target.parent.is_dir():
        raise BadInput(f"{out.parent}: no such directory; create it or give another -o")


def write(text: str, out: Path) -> None:
    """Write the playbook atomically after checking it loads as one (never into the package)."""
    check_target(out)
    target = out.resolve()
    try:
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".harness-learn-") as d:
            probe = Path(d) / target.name  # its name is the file's: the check is the file's own
            probe.write_text(text, encoding="utf-8")
            read_file(probe)
            os.replace(probe, target)
    except OSError as e:
        raise BadInput(f"cannot write {out}: {e.strerror or e}; give a writable path") from None


def _sessions(pb) -> list[str]:
    return [m.group(1) for e in [*pb.signatures, *pb.metric_rules] if (m := LEARNED.match(e.evidence))]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (a diff in a hint, a replaced block) as `|` blocks, readable in review."""


def _str(dumper: yaml.SafeDumper, s: str):
    # PyYAML falls back to a quoted style by itself where a block cannot hold the text exactly
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|" if "\n" in s else None)


_Dumper.add_representer(str, _str)
