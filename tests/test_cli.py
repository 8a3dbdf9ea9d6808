"""`harness analyze` as a user runs it: real processes, real files."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "logs"


def harness(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def test_missing_file_directory_and_bad_playbook_are_one_line_errors(tmp_path):
    for args, needle in [((tmp_path / "nope.log",), "no such file"), ((tmp_path,), "is a directory"),
                         ((FIXTURES / "pangu-fp16-loss-nan.log", "--playbook", "nosuch"), "no such playbook")]:
        r = harness("analyze", *args)
        assert r.returncode == 2, r.stderr
        assert needle in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_empty_file_binary_garbage_and_a_50mb_line_get_sane_verdicts(tmp_path):
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "garbage.log").write_bytes(os.urandom(200_000))
    with open(tmp_path / "long.log", "wb") as fh:
        for _ in range(50):
            fh.write(b"x" * (1 << 20))
    r = harness("analyze", "--json", tmp_path / "empty.log", tmp_path / "garbage.log", tmp_path / "long.log")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [v["outcome"] for v in out][0] == "unknown"
    assert all(v["outcome"] in ("running", "hang", "unknown") for v in out[1:])


def test_json_fields_for_one_log(tmp_path):
    r = harness("analyze", "--json", "--digest", "--max-tokens", "500", FIXTURES / "pangu-fp16-loss-nan.log")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    for key in ("file", "outcome", "last_stage_passed", "failed_stage", "stages", "root_cause", "metrics", "digest"):
        assert key in v
    assert [s["name"] for s in v["stages"]][0] == "engine_start" and len(v["stages"]) == 7
    assert set(v["root_cause"]) >= {"line_no", "text", "category", "class", "hint", "count"}
    assert len(v["digest"]) <= 500 * 4


def test_human_output_shows_chain_root_cause_and_hint():
    r = harness("analyze", FIXTURES / "pangu-fp16-loss-nan.log")
    assert r.returncode == 0, r.stderr
    assert "engine_start" in r.stdout and "actor_update" in r.stdout
    assert "root cause" in r.stdout and "hint:" in r.stdout


def test_usage_errors_are_one_line_with_exit_2():
    for args, needle in [(("analyze", "--max-tokens", "5", "x.log"), "--max-tokens"), (("analyze",), "Missing argument"),
                         (("bogus",), "No such command")]:
        r = harness(*args)
        assert r.returncode == 2
        assert needle in r.stderr and "--help" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_hung_log_s_digest_has_the_last_line_each_process_printed(tmp_path):
    """A 16-rank log that went quiet long ago: the digest holds the last line each rank printed,
    the one silent longest first (rank 9 stopped while scoring, 300 lines before the end), within
    the digest's bound; a log of one process has no such section."""
    lines = [f"[rank{r}]: step 3 started" for r in range(16)]
    lines += ["[rank9]: scoring batch 4"]
    lines += [f"[rank{i % 16 if i % 16 != 9 else 0}]: waiting for the update's all-reduce {i}" for i in range(300)]
    log = tmp_path / "hung.log"
    log.write_text("\n".join(lines) + "\n")
    os.utime(log, (1_000_000_000, 1_000_000_000))  # silent for years: hung
    r = harness("analyze", "--json", "--digest", log)
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert v["outcome"] == "hang" and len(v["digest"]) <= 4000 * 4, v["outcome"]
    said = v["digest"].split("## the last line each process printed (silent longest first)\n")[1].split("\n## ")[0]
    first = said.splitlines()[0]
    assert first == "[rank9]: scoring batch 4 — 300 line(s) before the end", said
    assert len(said.splitlines()) == 16 and "[rank11]: waiting for the update's all-reduce 299 — 0 line(s)" in said, said
    one = tmp_path / "one.log"
    one.write_text("step 3 started\nscoring batch 4\n")
    os.utime(one, (1_000_000_000, 1_000_000_000))
    v = json.loads(harness("analyze", "--json", "--digest", one).stdout)
    assert v["outcome"] == "hang" and "last line each process" not in v["digest"], v["digest"]
