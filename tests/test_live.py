"""Opt-in: `harness eval` against a real endpoint. Set HARNESS_LIVE_BASE_URL, HARNESS_LIVE_MODEL
and HARNESS_LIVE_KEY_ENV (the NAME of the variable holding its key; leave it empty for a keyless
local server) to run it; without them it is skipped, saying so. It contacts that endpoint only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

URL, MODEL, KEY_ENV = (os.environ.get(f"HARNESS_LIVE_{k}") for k in ("BASE_URL", "MODEL", "KEY_ENV"))
pytestmark = pytest.mark.skipif(not (URL and MODEL), reason="live endpoint test: set HARNESS_LIVE_BASE_URL, "
                                "HARNESS_LIVE_MODEL and HARNESS_LIVE_KEY_ENV to run harness eval against it")


def test_eval_against_a_live_endpoint(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"budgets": {"relaunches": 3}, "scenarios": [
        {"name": "reward-parse", "faults": ["06-reward-split-per-character"]},
        {"name": "speculative-config", "faults": ["04-speculative-config-without-mtp"]}]}))
    args = [str(Path(sys.executable).with_name("harness")), "eval", str(suite), "--json",
            "--model-url", URL, "--model", MODEL] + (["--api-key-env", KEY_ENV] if KEY_ENV else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=3600, env={**os.environ, "HARNESS_HOME": str(tmp_path)})
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["scripted"] is False and len(out["rows"]) == 2
    assert all(row["model_calls"] >= 1 for row in out["rows"])  # a real model was asked on each
