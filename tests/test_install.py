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
# the module fixture is built once: its tests share one xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_install")]


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


KINDS = ("whl", "tar.gz")


def _all(cmds: dict, timeout: float, **kw) -> dict:
    """Run the commands at once (each mostly waits: on pip's downloads, on the demo's runs)."""
    procs = {k: subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw.get(k, {}))
             for k, c in cmds.items()}
    return {k: (p.communicate(timeout=timeout), p.returncode) for k, p in procs.items()}


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> dict:
    """Each artifact pip-installed into a fresh venv, then `harness demo` run from elsewhere:
    {kind: (base dir, pip (out, err, rc), demo (out, err, rc))}."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    base = {kind: tmp_path_factory.mktemp(kind.replace(".", "")) for kind in KINDS}
    for kind, b in base.items():
        venv.create(b / "venv", with_pip=True)
        (b / "elsewhere").mkdir()
    pip = _all({kind: [str(b / "venv/bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                       str(next(dist.glob(f"harness-*.{kind}")))] for kind, b in base.items()},
               900, **{kind: {"env": env} for kind in KINDS})
    demo = _all({kind: [str(b / "venv/bin/harness"), "demo"] for kind, b in base.items() if pip[kind][1] == 0}, 600,
                **{kind: {"cwd": b / "elsewhere", "env": env | {"HARNESS_HOME": str(b / "home"),
                                                                 "HARNESS_CACHE": str(b / "cache")}}
                   for kind, b in base.items()})
    return {kind: (b, env, pip[kind], demo.get(kind)) for kind, b in base.items()}


@pytest.mark.parametrize("kind", KINDS)
def test_demo_from_a_fresh_venv_outside_the_checkout(installed, kind):
    base, env, ((_, pip_err), pip_rc), demo = installed[kind]
    assert pip_rc == 0, pip_err[-2000:]
    (out, err), rc = demo
    assert rc == 0, out[-3000:] + err[-2000:]
    assert "chain passed" in out
    where = subprocess.run([str(base / "venv/bin/python"), "-c", "import harness.demo as d; print(d.TARGET)"],
                           capture_output=True, text=True, cwd=base / "elsewhere", env=env).stdout.strip()
    assert where.startswith(str(base / "venv")), where  # the installed copy, not the checkout's
