"""The analyzer's two scanning paths give the same verdicts: with ahocorasick-rs (the default)
and the pure-Python one (HARNESS_PURE=1, or the wheel missing), on every fixture log, every
corpus log and two generated logs of the benchmark's shapes. Each path runs in its own process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corpus_eval import cases

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from loggen import write_log  # noqa: E402
from nightgen import write_night  # noqa: E402

pytestmark = pytest.mark.xdist_group("test_pure")

SCRIPT = """
import json, sys
from pathlib import Path
from harness.analyze import analyze_file
from harness.patterns import accelerated
out = {"accelerated": accelerated(), "verdicts": {}}
for p in sys.argv[1:]:
    v, _ = analyze_file(Path(p), now=1.9e9)
    out["verdicts"][p] = v
print(json.dumps(out, sort_keys=True))
"""


def verdicts(files: list[str], pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_PURE"} | ({"HARNESS_PURE": "1"} if pure else {})
    r = subprocess.run([sys.executable, "-c", SCRIPT, *files], capture_output=True, text=True, env=env,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_both_paths_give_the_same_verdicts(tmp_path):
    files = sorted(str(p) for p in (ROOT / "fixtures" / "logs").glob("*.log"))
    files += [str(c["path"]) for c in cases()]
    write_night(tmp_path / "night.log", 3 << 20, seed=7, error_every=300)
    write_log(tmp_path / "uniform.log", 2 << 20, seed=7)
    files += [str(tmp_path / "night.log"), str(tmp_path / "uniform.log")]
    fast, pure = verdicts(files, pure=False), verdicts(files, pure=True)
    assert fast["accelerated"] and not pure["accelerated"]
    assert len(fast["verdicts"]) == len(files) > 100
    differ = [f for f in files if fast["verdicts"][f] != pure["verdicts"][f]]
    assert not differ, differ[:5]
    assert fast["verdicts"][files[-2]]["outcome"] == "crash"  # the night's planted OOM
