"""Project plumbing: the CI entry, the README and the packaging agree with each other."""
import re
import shlex
from importlib.resources import files
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _commands(script: Path) -> list[str]:
    """Non-blank, non-comment lines of a shell script, minus `set`/`cd` plumbing."""
    lines = [ln.strip() for ln in script.read_text().splitlines()]
    return [ln for ln in lines if ln and not ln.startswith(("#", "set ", "cd "))]


def _readme_quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```[^\n]*\n(.*?)```", section, re.S)
    assert block, "README's Quick start has no code block"
    return [ln for ln in block.group(1).splitlines() if ln.strip()]


def test_ci_runs_the_readme_test_command():
    readme_test_cmd = _readme_quick_start()[1]
    assert _commands(ROOT / ".ci" / "run") == [readme_test_cmd]


def test_readme_quick_start_installs_then_runs_the_demo():
    first = shlex.split(_readme_quick_start()[0])
    assert first == ["bash", "scripts/install.sh", "&&", ".venv/bin/harness", "demo"]


def test_console_script_points_at_cli_main():
    tomllib = pytest.importorskip("tomllib")  # stdlib from Python 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"harness": "harness.cli:main"}
    module, func = project["scripts"]["harness"].split(":")
    assert callable(getattr(__import__(module, fromlist=[func]), func))


def test_installed_package_ships_the_playbooks():
    shipped = sorted(p.name for p in files("harness.playbooks").iterdir() if p.name.endswith(".yaml"))
    on_disk = sorted(p.name for p in (ROOT / "playbooks").glob("*.yaml"))
    assert on_disk, "no playbooks/*.yaml in the repo"
    assert shipped == on_disk
