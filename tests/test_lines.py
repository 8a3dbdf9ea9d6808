import re

from harness.analyze.lines import canonical, clean, decode, make_line, peel
from harness.playbook import load_playbook

RAY = re.compile(r"^\((?P<actor>[A-Za-z_][\w.<>:-]*)?,? ?(?:pid=(?P<pid>\d+))?(?:, ip=(?P<ip>[\d.]+))?\) ?")
RANK = re.compile(r"^\[rank(?P<rank>\d+)\]:(?:\[[EWI]\d{3,4} [^\]]+\] )? ?")
PREFIXES = [RAY, RANK]


def test_decode_survives_invalid_utf8_and_nul():
    assert decode(b"ok\xff\xfe\x00 end") == "ok\ufffd\ufffd end"


def test_clean_strips_ansi_and_keeps_last_redraw():
    raw = "\x1b[36m(WorkerDict pid=1)\x1b[0m  10%|#  | 1/10\r 50%|##  | 5/10\r100%|###| 10/10\r"
    assert clean(raw) == "(WorkerDict pid=1)  10%|#  | 1/10" or clean(raw) == "100%|###| 10/10"
    assert clean("a\rb\rfinal") == "final"
    assert "\x1b" not in clean("\x1b[1;32mgreen\x1b[0m")


def test_nested_ray_prefixes_inner_process_wins():
    line = make_line(3, "(vLLMHttpServer pid=1) (Worker_TP1 pid=2) ERROR boom", PREFIXES)
    assert line.text == "ERROR boom"
    assert line.actor == "Worker_TP1"
    assert line.proc == ":2"
    assert line.prefix == "(vLLMHttpServer pid=1) (Worker_TP1 pid=2) "


def test_rank_prefix_with_glog_head_and_ip():
    line = make_line(1, "(ActorX pid=9, ip=10.0.0.2) [rank1]:[E324 13:00:25.428029551 pg.cpp:574] Watchdog", PREFIXES)
    assert line.text == "Watchdog"
    assert line.rank == "1" and line.proc == "10.0.0.2:9"


def test_peel_keeps_indentation_of_traceback_frames():
    body, fields, _ = peel('[rank0]:   File "x.py", line 1, in f', PREFIXES)
    assert body == '  File "x.py", line 1, in f'
    assert fields == {"rank": "0"}


def test_repeated_suffix_counted():
    line = make_line(1, "(WorkerDict pid=5) boom [repeated 15x across cluster]", PREFIXES)
    assert line.repeat == 15 and line.text == "boom"


def test_huge_line_is_bounded():
    assert len(clean("x" * 10_000_000)) < 70_000


def test_canonical_ignores_numbers_and_ids():
    assert canonical("rank 3 pid=123 at 0xdeadbeef took 1.5s") == canonical("rank 12 pid=9 at 0x1 took 2s")


def test_a_ray_task_named_with_commas_is_a_prefix_a_tuple_is_not():
    """SkyPilot names each node's run task `head, rank=0,` (Ray prints `(name pid=N)`); the
    shipped prefix peels it. A tuple printed at the start of a line names no pid: kept."""
    shipped = load_playbook(None).prefixes
    line = make_line(1, "(node-0, worker1, rank=1, pid=22755, ip=172.31.81.91) RuntimeError: at 63:4:", shipped)
    assert (line.text, line.proc) == ("RuntimeError: at 63:4:", "172.31.81.91:22755")
    assert make_line(2, "(roflbot-train-002, pid=2251) step 3", shipped).text == "step 3"
    for kept in ("(x, y) = f()", "(True, 1) out", "(a, b, pid) 3"):
        assert make_line(3, kept, shipped).text == kept


def test_an_actor_s_repr_in_its_ray_prefix_is_peeled():
    """Ray prints an actor's repr in place of its class name when the class defines __repr__;
    NeMo-RL's workers give `Class[rank=N]`. A line that starts with an indexed expression is kept."""
    shipped = load_playbook(None).prefixes
    line = make_line(1, "(MegatronPolicyWorker[rank=8] pid=3294808, ip=10.109.19.209) Fatal Python error: Aborted", shipped)
    assert (line.text, line.actor, line.proc) == ("Fatal Python error: Aborted", "MegatronPolicyWorker[rank=8]", "10.109.19.209:3294808")
    for kept in ("(out[rank=0] is done) 1", "(batch[idx=3] pid) 4"):
        assert make_line(2, kept, shipped).text == kept
    # a repr written as a call (`Class(role-index)`, ROLL's workers)
    line = make_line(3, "(EnvWorker(train_env-0) pid=7) ERROR agent set-up failed", shipped)
    assert (line.text, line.actor, line.proc) == ("ERROR agent set-up failed", "EnvWorker(train_env-0)", ":7")
    assert make_line(4, "(f(x) is done) 1", shipped).text == "(f(x) is done) 1"


def test_a_ray_prefix_with_a_node_address_not_four_numbers_is_peeled():
    """Ray names the node by the address it knows it by: IPv6 in brackets, or a pod's host name
    where the node's address is set to it (tests/corpus/realworld42/4221, 4202)."""
    shipped = load_playbook(None).prefixes
    for ip in ("[fdbd:dccd:cdd2:2207::30f]", "train-1328-worker-0", "10.0.0.2"):
        line = make_line(1, f"(WorkerDict pid=42417, ip={ip}) AssertionError: Expects tensor on cuda:0", shipped)
        assert (line.text, line.actor, line.proc) == ("AssertionError: Expects tensor on cuda:0", "WorkerDict", f"{ip}:42417")
    assert make_line(2, "(WorkerDict pid=7, ip=a b) x", shipped).text == "(WorkerDict pid=7, ip=a b) x"  # no blank in it


def test_markdown_bold_around_a_pasted_error_is_not_the_program_s():
    """An issue's `**…**` around the error line that matters: the line as the program printed it;
    stars anywhere else (a call's `**kwargs`, a message's own) stay."""
    assert make_line(1, "[rank1]: **RuntimeError: world_size (8) is not equal to 4 x 1**", PREFIXES).text \
        == "RuntimeError: world_size (8) is not equal to 4 x 1"
    assert make_line(2, "(Env pid=3) **IndexError: index 0", PREFIXES).text == "IndexError: index 0"
    assert make_line(3, "**self._get_trainer_kwargs(),", PREFIXES).text == "**self._get_trainer_kwargs(),"
    assert make_line(4, "OutOfMemoryError: CUDA out of memory.** Tried", PREFIXES).text == "OutOfMemoryError: CUDA out of memory.** Tried"
