import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests import corpus_eval, sshd

from sshd import SSHD, SshLab  # noqa: E402


def pytest_collection_modifyitems(items):
    """The slow tests first (a stable sort): under pytest-xdist the run ends when its longest
    test does, so the long ones must not be handed out last."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def ssh_lab(tmp_path_factory):
    """Two real sshd on 127.0.0.1 (`box`, `jump`) and `inner` (box through jump), with their
    own keys, known_hosts and ssh_config. Needs openssh-server (scripts/test.sh installs it)."""
    if not (shutil.which("sshd") or os.path.exists(SSHD)):
        if os.environ.get("CI"):
            pytest.fail("sshd is missing: scripts/test.sh should have installed openssh-server")
        pytest.skip("sshd not installed (bash scripts/test.sh installs openssh-server)")
    lab = SshLab(tmp_path_factory.mktemp("ssh")).start()
    yield lab
    lab.stop()


@pytest.fixture
def arun():
    """Run a coroutine to completion on this test's own event loop, bounded (60 s)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    def arun(coro):
        return loop.run_until_complete(asyncio.wait_for(coro, 60))

    yield arun
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    asyncio.set_event_loop(None)
    loop.close()


@pytest.fixture(scope="session")
def ray_head():
    """A real Ray head on 127.0.0.1 with its Jobs API (harness.engines.LocalRay). Needs
    ray[default] (scripts/test.sh installs it into .venv)."""
    from harness.engines import LocalRay, ray_bin

    if ray_bin() is None:
        if os.environ.get("CI"):
            pytest.fail("ray is missing: scripts/test.sh should have installed ray[default]")
        pytest.skip("ray not installed (bash scripts/test.sh installs ray[default])")
    head = LocalRay().start()
    yield head
    head.stop()


@pytest.fixture(scope="session")
def slurm_lab():
    """Real munged + slurmctld + slurmd on a single-node slurm.conf of their own
    (harness.engines.LocalSlurm). Needs Debian's slurm-wlm and munge (scripts/test.sh installs them)."""
    from harness.engines import LocalSlurm, slurm_missing

    missing = slurm_missing() or (os.geteuid() != 0 and "root")
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} is missing: scripts/test.sh should have installed slurm-wlm and munge")
        pytest.skip(f"{missing} not available (bash scripts/test.sh installs slurm-wlm and munge)")
    lab = LocalSlurm().start()
    yield lab
    lab.stop()
