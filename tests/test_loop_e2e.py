"""The whole loop end to end: minichain with all ten faults, over asyncssh to the real loopback
sshd, the scripted model behind a real OpenAI-compatible HTTP server reached by the real
`openai` client (its first answer a 429). The chain must pass; the ledger must hold one commit
per launch; the journal must tell the story; nothing of the run may be left alive."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys

import pytest

from harness.agent.model import OpenAIModel
from harness.agent.scripted import ScriptedModel, ScriptedServer
from harness.demo import SCRIPT
from harness.remote.transport import HostSpec, connect
from harness.session.journal import Journal
from harness.session.ledger import Ledger
from harness.session.runner import run_spec
from harness.spec import RunSpec
from test_minichain import PROXY_VARS, TARGET, processes_of
from test_minichain_faults import FAULTS
from names import unique

STORY = ["04", "01", "06", "08", "10", "03", "07", "05", "09", "02"]
DECLARED = {"08": "minichain_worker_proxy", "10": "minichain_concurrency_limit",
            "03": "minichain_prompt_too_long", "09": "minichain_precision_aware_fp16"}


@pytest.mark.slow
def test_all_ten_faults_to_a_green_chain_over_ssh(ssh_lab, tmp_path):
    work = tmp_path / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    for name, *_ in FAULTS:
        subprocess.run(["git", "apply", str(TARGET / "faults" / f"{name}.patch")], cwd=work, check=True)
    spec = RunSpec.model_validate({
        "host": "box", "transport": "asyncssh", "ssh_config": str(ssh_lab.ssh_config),
        "known_hosts": str(ssh_lab.known_hosts), "workdir": str(work),
        "launch": {"command": "bash run.sh", "env": {"PYTHON": sys.executable}, "unset": sorted(PROXY_VARS),
                   "settle": 2, "stall": 60},
        "playbooks": ["minichain"], "budgets": {"wall_clock": "10m"}})
    with ScriptedServer(ScriptedModel.from_file(SCRIPT), fail=[(429, 0.05)]) as server:
        model = OpenAIModel(server.url, "scripted", "test-key")
        d = tmp_path / unique("session")
        ses = asyncio.run(run_spec(spec, d, model=model))
    journal = Journal.read(d / "journal.jsonl")
    kinds = [e["type"] for e in journal]
    assert kinds[0] == "session" and kinds[-1] == "end" and journal[-1]["reason"] == "passed", journal[-1]

    # the story: declared fixes for the four configuration faults, the agent for the six others
    verdicts = [e for e in journal if e["type"] == "verdict"]
    assert [v["outcome"] for v in verdicts] == ["crash"] * 6 + ["hang", "crash", "crash", "wrong_result", "pass"]
    fixes = [e["signature"] for e in journal if e["type"] == "fix" and e["applied"]]
    assert fixes == [DECLARED[n] for n in STORY if n in DECLARED]
    relaunches = [e for e in journal if e["type"] == "tool" and e["end"] == "relaunch"]
    assert len(relaunches) == 6
    models = [e for e in journal if e["type"] == "model"]
    assert models[0]["retries"] == 1 and all(m["retries"] == 0 for m in models[1:])  # the 429, then 200
    assert ses.state.passed and len(ses.state.attempts) == 11

    # one ledger commit per launch; the cumulative change touches exactly the faulted files
    launches = [e for e in journal if e["type"] == "launch"]

    async def ledger_view():
        t = await connect(HostSpec(host="box", transport="asyncssh", ssh_config=str(ssh_lab.ssh_config),
                                   known_hosts=str(ssh_lab.known_hosts)))
        try:
            led = Ledger(t, str(work), ses.session)
            return await led.attempts(), await led.changed_files()
        finally:
            await t.close()
    commits, changed = asyncio.run(ledger_view())
    assert [c[0] for c in commits] == [e["attempt"] for e in launches] == list(range(1, 12))
    assert [c[1] for c in commits] != [e["sha"] for e in launches]  # annotated after each verdict
    verdicts = [e for e in journal if e["type"] == "verdict"]
    assert [c[2].rsplit(" -> ", 1)[1].split()[0] for c in commits] == [v["outcome"] for v in verdicts]
    assert sorted(changed) == ["config.yaml", "minichain/agent.py", "minichain/bridge.py", "minichain/reward.py",
                               "minichain/server.py", "minichain/trainer.py"]
    assert all(e["survivors"] == [] for e in journal if e["type"] == "stopped")
    assert processes_of(work) == []
