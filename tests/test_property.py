"""Arbitrary bytes never make the analyzer raise, whatever the chunking."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.analyze import Analyzer, build_digest
from harness.playbook import load_playbook

UNION = load_playbook(None)
PIECES = [b"Traceback (most recent call last):\n", b'  File "x.py", line 1, in f\n', b"ValueError: x\n",
          b"(WorkerDict pid=1) ", b"[rank0]: ", b"\x1b[31m", b"\r", b"\x00", b"\xff\xfe", b"step:1 - loss:nan\n",
          b"The above exception was the direct cause of the following exception:\n", b"\n", b" [repeated 3x across cluster]"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.binary(max_size=200), st.sampled_from(PIECES)), max_size=40),
       st.integers(min_value=1, max_value=64))
def test_arbitrary_bytes_never_raise(parts, chunk):
    data = b"".join(parts)
    a = Analyzer(UNION)
    for i in range(0, len(data), chunk):
        a.feed(data[i:i + chunk], ts=1.0)
    a.finish()
    v = a.verdict(now=10_000.0)
    assert v["outcome"] in ("pass", "crash", "hang", "wrong_result", "running", "unknown")
    assert 0 <= v["last_stage_passed"] <= 7
    assert len(build_digest(v, a, max_tokens=300)) <= 1200
