"""As a new user installs it: the wheel and the sdist built from the repository, each installed with
pip into a fresh venv outside the checkout, give a working `harness demo` run from another
directory (minichain, its faults, the playbooks and the demo script ship as package data; numpy,
which minichain needs, comes with the package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """sdist and wheel of the repository's files (tracked or new, not ignored), the wheel built
    from the sdist — so the sdist is proved complete too."""
    base = tmp_path_factory.mktemp("build")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (base / "src" / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, base / "src" / f)
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(base / "dist"), str(base / "src")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return base / "dist"


@pytest.mark.parametrize("kind", ["whl", "tar.gz"])
def test_demo_from_a_fresh_venv_outside_the_checkout(dist, tmp_path, kind):
    (artifact,) = dist.glob(f"harness-*.{kind}")
    venv.create(tmp_path / "venv", with_pip=True)
    py = tmp_path / "venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(artifact)],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    demo = subprocess.run([str(tmp_path / "venv" / "bin" / "harness"), "demo"], cwd=elsewhere, capture_output=True,
                          text=True, timeout=600, env=env | {"HARNESS_HOME": str(tmp_path / "home"),
                                                             "HARNESS_CACHE": str(tmp_path / "cache")})
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-2000:]
    assert "chain passed" in demo.stdout
    where = subprocess.run([str(py), "-c", "import harness.demo as d; print(d.TARGET)"], capture_output=True,
                           text=True, cwd=elsewhere, env=env).stdout.strip()
    assert where.startswith(str(tmp_path / "venv")), where  # the installed copy, not the checkout's
