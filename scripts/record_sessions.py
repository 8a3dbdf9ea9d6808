"""Record the replay fixtures of fixtures/sessions/ (what CI replays: tests/test_replay.py).

    .venv/bin/python scripts/record_sessions.py [NAME ...]     # all three, or the named ones

Each is a real session of minichain with faults applied, reached over asyncssh through a real
sshd on 127.0.0.1 (tests/sshd.py), the agent being the scripted model behind a real
OpenAI-compatible HTTP server, recorded as every session is, then exported with scrubbing
(`harness export --scrub`) into fixtures/sessions/NAME/:

    all-faults   all ten faults to a green chain (the demo's story; the model's first answer a 429)
    budget       all ten faults with budgets.relaunches=3: the budget runs out
    stuck        fault 04 with a model that looks but changes nothing: told its relaunch would change
                 nothing, it asks again — stuck after one attempt

Everything lives under /tmp/harness-fixtures/NAME (a fixed path: the workdir is in the recorded
commands, so a re-recording differs only where the runs did). Review the fixtures' diffs: a
recording is a real run, timings and pids change.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from sshd import SshLab  # noqa: E402

from harness.agent.model import OpenAIModel  # noqa: E402
from harness.agent.scripted import ScriptedModel, ScriptedServer  # noqa: E402
from harness.demo import SCRIPT, TARGET, prepare  # noqa: E402
from harness.export import export_session  # noqa: E402
from harness.remote.launch import PROXY_VARS  # noqa: E402
from harness.session.runner import run_spec  # noqa: E402
from harness.spec import RunSpec, dump_spec  # noqa: E402

BASE = Path("/tmp/harness-fixtures")
OUT = ROOT / "fixtures" / "sessions"
ALL = sorted(p.stem for p in (TARGET / "faults").glob("*.patch"))
LOOK_ONLY = [{"when": ".", "replies": [
    {"content": "Looking at how the server builds its speculative config.",
     "calls": [{"tool": "bash", "args": {"command": "grep -n speculative minichain/server.py | head -5"}}]},
    {"content": "Nothing wrong that I can see; it may have been transient.",
     "calls": [{"tool": "relaunch", "args": {"summary": "retry unchanged"}}]},
    {"content": "Still think it was transient.",
     "calls": [{"tool": "relaunch", "args": {"summary": "retry unchanged, really"}}]}]}]
SESSIONS = {
    "all-faults": {"faults": ALL, "rules": SCRIPT, "budgets": {}, "fail": [(429, 0.05)]},
    "budget": {"faults": ALL, "rules": SCRIPT, "budgets": {"relaunches": 3}, "fail": []},
    "stuck": {"faults": ["04-speculative-config-without-mtp"], "rules": LOOK_ONLY,
              "budgets": {"stuck_after": 3}, "fail": []},
}


def record(name: str) -> Path:
    how, base = SESSIONS[name], BASE / name
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    (base / "ssh").mkdir()
    lab = SshLab(base / "ssh").start()
    try:
        box = lab.servers["box"]
        spec = RunSpec.model_validate({
            "host": "127.0.0.1", "port": box.port, "user": box.user, "key": str(lab.client_key),
            "known_hosts": str(lab.known_hosts), "transport": "asyncssh",
            "workdir": str(prepare(base, how["faults"])),
            "launch": {"command": "bash run.sh", "env": {"PYTHON": sys.executable}, "unset": sorted(PROXY_VARS),
                       "settle": 2, "stall": 60},
            "playbooks": ["minichain"], "budgets": {"wall_clock": "10m", **how["budgets"]}})
        session = base / "sessions" / name
        session.mkdir(parents=True)
        (session / "spec.yaml").write_text(dump_spec(spec), encoding="utf-8")
        rules = ScriptedModel.from_file(how["rules"]) if isinstance(how["rules"], Path) else ScriptedModel(how["rules"])
        with ScriptedServer(rules, fail=how["fail"]) as server:
            ses = asyncio.run(run_spec(spec, session, model=OpenAIModel(server.url, "scripted", "fixture-key")))
    finally:
        lab.stop()
    out = OUT / name
    shutil.rmtree(out, ignore_errors=True)
    manifest = export_session(session, out, scrub=True)
    print(f"{out.relative_to(ROOT)}: {ses.state.ended['reason']} after {len(ses.state.attempts)} attempts, "
          f"{manifest['entries']} recorded calls, placeholders {manifest['placeholders']}")
    shutil.rmtree(base, ignore_errors=True)
    return out


def main(wanted: list[str]) -> None:
    unknown = [w for w in wanted if w not in SESSIONS]
    if unknown:
        sys.exit(f"no fixture {' '.join(unknown)}: pick from {' '.join(SESSIONS)}")
    for name in wanted or SESSIONS:
        record(name)


if __name__ == "__main__":
    main(sys.argv[1:])
