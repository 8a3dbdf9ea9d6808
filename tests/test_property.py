"""Arbitrary bytes never make the analyzer raise, whatever the chunking; the gate never changes a verdict."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.analyze import Analyzer, build_digest
from harness.analyze.verdict import jsonable
from harness.playbook import load_playbook

UNION = load_playbook(None)
PIECES = [b"Traceback (most recent call last):\n", b'  File "x.py", line 1, in f\n', b"ValueError: x\n",
          b"(WorkerDict pid=1) ", b"[rank0]: ", b"\x1b[31m", b"\r", b"\x00", b"\xff\xfe", b"step:1 - loss:nan\n",
          b"The above exception was the direct cause of the following exception:\n", b"\n", b" [repeated 3x across cluster]",
          # the shapes pastes give a traceback: its code, an exception indented as deep, an elision, a
          # bare assert; IPython's, faulthandler's and py-spy's stacks
          b"    code()\n", b"    ValueError: x\n", b"...\n", b"AssertionError\n",
          b"ValueError                                Traceback (most recent call last)\n", b"Cell In[1], line 2\n",
          b"----> 2 f()\n", b"Fatal Python error: Aborted\n", b"Stack (most recent call first):\n",
          b'Thread 0x1 (idle): "MainThread"\n', b"    f (x.py:1)\n"]


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


LINES = [b"(WorkerDict pid=7, ip=10.0.0.2) [rank3]: megatron_actor.py:12 micro batch\n",
         b"(TaskRunner pid=1) step:3 - actor/pg_loss:0.1 - actor/grad_norm:0.5 - critic/score/mean:0.4\n",
         b"(TaskRunner pid=1) step:4 - actor/pg_loss:nan - actor/grad_norm:nan\n",
         b"(vLLMHttpServer pid=3) (Worker_TP1 pid=4) INFO 06-04 22:25:02 [core.py:210] init engine "
         b"(profile, create kv cache, warmup model) took 7.5 seconds\n",
         b'(vLLMHttpServer pid=3) INFO:     127.0.0.1:5 - "POST /v1/completions HTTP/1.1" 200 OK\n',
         b"(WorkerDict pid=9) /x/checkpoint.py:3: UserWarning: use_reentrant [repeated 4x across cluster]\n",
         b"(WorkerDict pid=9) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
         b"ERROR 06-04 22:25:02 [serving_chat.py:9] Error in chat completion stream generator.\n"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(LINES), st.sampled_from(PIECES), st.binary(max_size=60)), max_size=60))
def test_the_gate_never_changes_a_verdict(parts):
    """Skipping the lines the gate rules out gives the verdict of reading every line."""
    data = b"".join(parts)
    out = []
    for fast in (True, False):
        a = Analyzer(UNION, fast=fast)
        a.feed(data, ts=1.0)
        a.finish()
        out.append(json.dumps(jsonable(a.verdict(now=10_000.0)), sort_keys=True))  # NaN as "nan"
    assert out[0] == out[1]
