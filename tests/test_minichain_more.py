"""Eighteen faults of our own beyond the ten of the story (fixtures/targets/minichain/faults/more/),
used as generalisation tests: every stage, other categories, infra-like and code faults, wrong
results, a silent hang and a silent phase that must not be called one. The labels below were
written from what each patch breaks, before the analyzer was run on them; no playbook entry
names minichain's text for any of them (faults/more/README.md).

Each patch is applied to a clean copy and the real run is analysed with minichain's playbook;
reversing it makes the run pass again."""

from __future__ import annotations

import asyncio
import re
import shutil
import sys

import pytest

from harness.agent.scripted import ScriptedModel
from harness.chain import STAGES
from harness.demo import SCRIPT
from harness.session.journal import Journal
from harness.session.runner import run_spec
from harness.spec import RunSpec
from test_minichain import PROXY_VARS, TARGET, processes_of
from test_minichain_faults import analyse, by_fault, git, run, run_patched
from names import unique

MORE = TARGET / "faults" / "more"
LIMIT = 60.0  # seconds before a run still going counts as hung and is killed: a bound, not a figure
# (a hang is usually cut short by HANG_SIGN; a loaded 2-core machine stretches 22's silent compile)

# patch, outcome, failed stage, root-cause category, regex the root cause's text matches
MORE_FAULTS = [
    ("11-np-float-alias-removed", "crash", "training_data", "version_incompat", r"has no attribute 'float'"),
    ("12-weight-sync-lm-head-transposed", "crash", "completion", "weight_mapping", r"mismatch in its core dimension"),
    ("13-task-ids-numpy-int64", "crash", "task_dispatch", "data_format", r"not JSON serializable"),
    ("14-env-observation-list", "crash", "trajectory", "data_format", r"can only concatenate str"),
    ("15-reward-verifier-too-slow", "crash", "reward", "timeout", r"timed out after"),
    ("16-reward-field-renamed-swallowed", "wrong_result", "reward", "reward_parsing", r"critic/score/max:0\b"),
    ("17-advantage-std-no-epsilon", "wrong_result", "training_data", "precision_dtype", r"advantages.{0,20}nan"),
    ("18-response-leading-space", "crash", "training_data", "data_format", r"is not in list"),
    ("19-kv-cache-max-num-seqs", "crash", "engine_start", "oom", r"Unable to allocate"),
    ("20-optimizer-state-hf-names", "crash", "actor_update", "weight_mapping", r"KeyError: 'output_layer.weight'"),
    # no timeout fires (the barrier waits for ever): `other`, as real silent hangs outside collectives are labelled
    ("21-agents-start-barrier-hang", "hang", "trajectory", "other", r"agent worker started"),
    ("22-silent-graph-compile", "pass", None, None, None),
    # written later in the same session, after the mechanisms above were in (see the README's figures)
    ("23-prompt-file-missing", "crash", "task_dispatch", "config_mismatch", r"No such file or directory"),
    ("24-config-key-renamed", "crash", "engine_start", "config_mismatch", r"not 'NoneType'"),
    ("25-env-observation-none", "crash", "trajectory", "data_format", r'can only concatenate str \(not "NoneType"\)'),
    ("26-reward-nan-unscored", "wrong_result", "reward", "reward_parsing", r"critic/score/mean:nan"),
    ("27-server-vocab-larger", "crash", "completion", "config_mismatch", r"a and p must have same size"),
    ("28-loss-scale-overflow", "wrong_result", "actor_update", "precision_dtype", r"grad_norm:nan"),
]
# Where the analyzer is still wrong, and why (the README's generalisation figures count these).
KNOWN_MISSES = {
    "12-weight-sync-lm-head-transposed": "category: a shape error in generation after a weight sync reads as "
                                         "`other`; nothing in the message says the synced layout is wrong",
    "13-task-ids-numpy-int64": "stage: the tasks are written inside the driver's `generate`, which every "
                               "framework's vocabulary calls rollout work",
    "27-server-vocab-larger": "category: numpy's `a and p must have same size` in the sampler says a size "
                              "mismatch, not that the served head has more rows than the tokenizer has tokens",
}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            code, _, log, work = run_patched(tmp_path_factory.mktemp(f"more{name[:2]}-"), MORE / f"{name}.patch", LIMIT)
            cache[name] = (code, log, work)
        return cache[name]
    return get


def got(verdict: dict) -> tuple:
    rc = verdict["root_cause"]
    stage = STAGES[verdict["failed_stage"] - 1] if verdict["failed_stage"] else None
    return verdict["outcome"], stage, rc and rc["category"]


def test_every_patch_has_a_row():
    assert sorted(p.stem for p in MORE.glob("*.patch")) == [f[0] for f in MORE_FAULTS]
    assert set(KNOWN_MISSES) <= {f[0] for f in MORE_FAULTS}


@pytest.mark.parametrize("name,outcome,stage,category,text", by_fault(MORE_FAULTS))
def test_fault_is_read_where_it_happens(ran, name, outcome, stage, category, text):
    code, log, work = ran(name)
    verdict, _ = analyse(log)
    rc = verdict["root_cause"]
    want = (outcome, stage, category)
    if name in KNOWN_MISSES:  # still wrong: pin what is right, and that the miss is still a miss
        assert got(verdict)[0] == outcome and got(verdict) != want, (KNOWN_MISSES[name], verdict["root_cause"])
    else:
        assert got(verdict) == want, (verdict["root_cause"], log.read_text()[-3000:])
    if text:
        assert re.search(text, rc["text"]), rc
    assert (code is None) == (outcome == "hang"), code
    if outcome == "crash":
        assert code == 1
    assert processes_of(work) == []


@pytest.mark.parametrize("name", by_fault([f[:1] for f in MORE_FAULTS if f[1] != "pass"]))
def test_reversing_the_patch_passes_again(ran, name):
    _, _, work = ran(name)
    git(work, "apply", "-R", str(MORE / f"{name}.patch"))
    log = work.parent / "reverted.log"
    code, _ = run(work, log)
    verdict, _ = analyse(log)
    assert code == 0 and verdict["outcome"] == "pass", log.read_text()[-3000:]


def test_a_silent_compile_is_not_called_a_hang(ssh_lab, tmp_path):
    """The rollout server computes for 8 s without a line (a graph capture) while the session's
    stall check fires every 2 s: the harness sees the CPU in use, notes it, keeps waiting, and
    the run passes on its first attempt with no model call."""
    work = tmp_path / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    git(work, "init", "-q")
    git(work, "apply", str(MORE / "22-silent-graph-compile.patch"))
    spec = RunSpec.model_validate({
        "host": "box", "transport": "asyncssh", "ssh_config": str(ssh_lab.ssh_config),
        "known_hosts": str(ssh_lab.known_hosts), "workdir": str(work),
        "launch": {"command": "bash run.sh", "env": {"PYTHON": sys.executable}, "unset": sorted(PROXY_VARS),
                   "settle": 2, "stall": 2},
        "playbooks": ["minichain"], "budgets": {"wall_clock": "5m"}})
    model = ScriptedModel.from_file(SCRIPT)
    d = tmp_path / unique("session")
    ses = asyncio.run(run_spec(spec, d, model=model))
    journal = Journal.read(d / "journal.jsonl")
    notes = [e["text"] for e in journal if e["type"] == "note"]
    assert journal[-1]["type"] == "end" and journal[-1]["reason"] == "passed", journal[-1]
    assert any("printed nothing" in n and "use CPU" in n for n in notes), notes
    assert [e["outcome"] for e in journal if e["type"] == "verdict"] == ["pass"]
    assert not [e for e in journal if e["type"] == "model"] and len(ses.state.attempts) == 1
    assert processes_of(work) == []
