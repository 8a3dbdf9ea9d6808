"""Scrubbing (harness/scrub.py) and `harness export` (harness/export.py): secrets, host and user
names, IPs and home paths become stable, length-preserving, shell-safe placeholders; a real
session's planted secrets never reach its exported fixture."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shlex
import stat
import sys
from pathlib import Path

import pytest

from harness.agent.scripted import ScriptedModel
from harness.export import export_session
from harness.record import read_recording
from harness.scrub import Scrubber, is_secret_name, placeholder
from harness.session.detach import mark_holder, take_lock
from harness.session.journal import Journal
from harness.session.runner import run_spec
from harness.spec import dump_spec, load_spec
from test_loop import FAILING, spec_for
from test_sessions import harness

KEY_LINES = ["MIIEpAIBAAKCAQEAzq8Xv3Lk2Jm9Wn4Rt7Yb1Hc6Gd5Fe0SaQp2Ow3Nv4Mu5Lt6Ks7",
             "Jr8Iq9Hp0Go1Fn2Em3Dl4Ck5Bj6Ai7Zz8Yy9Xx0Ww1Vv2Uu3Tt4Ss5Rr6Qq7Pp8Oo=="]
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(KEY_LINES) + "\n-----END RSA PRIVATE KEY-----\n"

SECRET_SHAPES = [  # (text, the secret in it)
    ("export WANDB_API_KEY=0123abcd9876fedc", "0123abcd9876fedc"),
    ("export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"),
    ('{"password": "hunter22", "max_tokens": 512}', "hunter22"),
    ("hf_token: 'tok with space'", "tok with space"),
    ("apiKey: zzzz9999yyyy", "zzzz9999yyyy"),
    ("curl -H 'x-api-key: qqqq1111' -H 'X-Auth-Token: rrrr2222'", "qqqq1111"),
    ("curl -H 'X-Auth-Token: rrrr2222'", "rrrr2222"),
    ("train.py --token abcd1234efgh", "abcd1234efgh"),
    ("AWS_SECRET_ACCESS_KEY = wJalrXUtnFEMIbPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMIbPxRfiCYEXAMPLEKEY"),
    ("Authorization: Bearer abc.def-123456789", "abc.def-123456789"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "dXNlcjpwYXNzd29yZA=="),
    ("sent with bearer Zm9vYmFyYmF6MTIz", "Zm9vYmFyYmF6MTIz"),
    ("key sk-proj-abcdefghijklmnopqrstuv in the config", "sk-proj-abcdefghijklmnopqrstuv"),
    ("GITHUB ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJlMTIz",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJlMTIz"),
    ("db postgres://dbuser7:s3cretpw@db.internal:5432/x", "s3cretpw"),
    ("db postgres://dbuser7:s3cretpw@db.internal:5432/x", "dbuser7"),
    ("key:\n" + PRIVATE_KEY, KEY_LINES[0]),
    ("key:\n" + PRIVATE_KEY, KEY_LINES[1]),
    (json.dumps({"cmd": "cat id_rsa", "out": PRIVATE_KEY}), KEY_LINES[1]),  # a body in JSON: \n escaped
    ("ray head at 10.23.45.67:6379", "10.23.45.67"),
    ("cd /home/alicebob/.cache", "alicebob"),
    ("USER=alicebob LOGNAME=alicebob", "alicebob"),
]

NOT_SECRETS = ["max_tokens: 512", "TOKENIZERS_PARALLELISM=false", "the root cause is", "ls /root/x /home/ubuntu/y",
               "bind 127.0.0.1:8000 and 0.0.0.0:80", "version 1.2.3 of torch 2.1.0", "num_tokens=77",
               "tokenizer_path=/models/tok response_length: 2048", "pad_token: <pad> eos_token='</s>'",
               "api_key_env: DEEPSEEK_API_KEY", "PWD=/root/work USER=root", "token = tokenizer.encode(text)",
               "HF_TOKEN=$HF_TOKEN password: null secret: true", "Authorization: Bearer <redacted>"]


def scrubbed(*texts: str, **known) -> tuple[Scrubber, list[str]]:
    s = Scrubber(**known)
    for t in texts:
        s.collect(t)
    return s, [s.scrub(t) for t in texts]


@pytest.mark.parametrize("text,secret", SECRET_SHAPES)
def test_each_secret_shape_is_hidden_with_a_placeholder_of_its_length(text, secret):
    s, [out] = scrubbed(text)
    assert secret not in out and secret.lower() not in out.lower()
    assert len(out) == len(text)
    assert s.mapping and all(shlex.quote(p) == p for p in s.mapping.values())


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_what_is_not_private_is_left_alone(text):
    s, [out] = scrubbed(text, users=["root"], hosts=["localhost", "127.0.0.1"])
    assert out == text and not any(s.placeholders.values())


def test_secret_names_are_whole_segments():
    for name in ("WANDB_API_KEY", "HF_TOKEN", "hf_token", "OPENAI_API_KEY", "password", "apiKey", "x-auth-token",
                 "db.passwd", "GOOGLE_CREDENTIALS", "private_key", "secret"):
        assert is_secret_name(name), name
    for name in ("max_tokens", "num_tokens", "TOKENIZERS_PARALLELISM", "tokenizer_path", "response_length",
                 "pad_token", "api_key_env", "password_file", "author", "monkey"):
        assert not is_secret_name(name), name


def test_a_value_found_in_one_text_is_replaced_everywhere_with_the_same_placeholder():
    log = "export WANDB_API_KEY=wandb0f3c9a7e5d1b\nssh alicebob@gpu-node-17"
    message = "I see the key wandb0f3c9a7e5d1b; the host GPU-NODE-17 and /home/alicebob/x"
    s, [log_out, msg_out] = scrubbed(log, message, hosts=["gpu-node-17"], users=["alicebob"])
    token = s.mapping["wandb0f3c9a7e5d1b"]
    assert token in log_out and token in msg_out and "wandb0f3c" not in msg_out
    assert token.startswith("SECRET") and len(token) == len("wandb0f3c9a7e5d1b")
    host, user = s.mapping["gpu-node-17"], s.mapping["alicebob"]
    assert msg_out.count(host) == 1 and log_out.count(host) == 1 and msg_out.count(user) == 1
    assert "gpu-node" not in (log_out + msg_out).lower() and "alicebob" not in log_out + msg_out


def test_names_match_whole_words_only_and_generic_users_never():
    s, [out] = scrubbed("alice malice alice_x alice-x root /home/alice/", users=["alice", "root"])
    assert out == "user1 malice alice_x user1-x root /home/user1/"


def test_placeholders_keep_lengths_are_shell_safe_and_short_values_get_short_forms():
    assert placeholder("secret", 1, 12) == "SECRET1xxxxx" and placeholder("secret", 2, 4) == "S2xx"
    assert placeholder("user", 1, 5) == "user1" and placeholder("user", 1, 3) == "u1x"
    assert placeholder("host", 3, 2) == "h3"
    assert placeholder("word", 12, 2) == "w12"  # shorter than any placeholder: the text grows, nothing stays
    for length in range(7, 16):  # an IPv4 of each possible length
        ips = [placeholder("ip", i, length) for i in range(1, 300)]
        assert len(set(ips)) == len(ips) and {len(ip) for ip in ips} == {length}
        assert all(0 <= int(o) <= 255 for ip in ips for o in ip.split(".")) and all(shlex.quote(ip) == ip for ip in ips)
    _, [out] = scrubbed("at 10.1.2.3 and 192.168.100.200 and 8.8.8.8")
    assert len(out) == len("at 10.1.2.3 and 192.168.100.200 and 8.8.8.8") and "10.1.2.3" not in out


def test_scrub_is_idempotent_with_the_same_and_a_fresh_scrubber():
    texts = [t for t, _ in SECRET_SHAPES] + NOT_SECRETS
    s, once = scrubbed(*texts, hosts=["gpu-node-17"], users=["alicebob"], words=["projzephyr"])
    assert [s.scrub(t) for t in once] == once
    fresh, twice = scrubbed(*once)
    assert twice == once and not any(fresh.placeholders.values())


def test_data_fields_are_scrubbed_as_bytes_and_round_trip():
    raw = b"\xff\xfebinary \x00 then export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345\n\xc3\x28"
    entry = {"n": 1, "k": "read", "path": "/w/run.log", "offset": 0, "data": base64.b64encode(raw).decode(),
             "t0": 1.5, "ok": True, "env": {"HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"}}
    s = Scrubber()
    s.collect_value(entry)
    out = s.scrub_value(entry)
    data = base64.b64decode(out["data"])
    assert b"hf_AbCd" not in data and len(data) == len(raw)
    assert data.startswith(b"\xff\xfebinary \x00 then export HF_TOKEN=SECRET1") and data.endswith(b"\n\xc3\x28")
    assert out["env"] == {"HF_TOKEN": s.mapping["hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"]}  # keys stay
    assert (out["t0"], out["ok"], out["n"]) == (1.5, True, 1)


# -- export ------------------------------------------------------------------------------------

def hand_session(d: Path, recording: list[dict] | None, tail: str = "", **spec) -> Path:
    """A session directory written by hand (what a controller leaves), for export's edge cases."""
    d.mkdir(parents=True)
    (d / "spec.yaml").write_text(dump_spec(spec_for(Path("/srv/work"), **spec)))
    (d / "journal.jsonl").write_text(json.dumps({"seq": 1, "t": 1.0, "type": "session", "host": "localhost"}) + "\n")
    if recording is not None:
        (d / "recording.jsonl").write_text("".join(json.dumps(e) + "\n" for e in recording) + tail)
    return d


def read_entry(n: int, offset: int, data: bytes) -> dict:
    return {"n": n, "k": "read", "path": "/srv/work/run.log", "offset": offset, "size": None,
            "data": base64.b64encode(data).decode(), "t0": 1.0, "t1": 1.0}


def test_a_secret_cut_by_two_reads_of_a_log_is_hidden_and_a_torn_line_dropped(tmp_path):
    log = b"step 1\nexport HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345\nstep 2\n"
    cut = log.index(b"hf_AbCd") + 10
    d = hand_session(tmp_path / "s1", [read_entry(1, 0, log[:cut]), read_entry(2, cut, log[cut:])],
                     tail='{"n": 3, "k": "read", "pa')  # the controller died mid-write
    m = export_session(d, tmp_path / "out", scrub=True)
    assert m["entries"] == 2 and m["events"] == 1 and m["scrubbed"] and m["placeholders"]["secret"] == 1
    rec = read_recording(tmp_path / "out" / "recording.jsonl")
    chunks = [base64.b64decode(e["data"]) for e in rec]
    assert [len(c) for c in chunks] == [cut, len(log) - cut]  # offsets still add up
    assert b"".join(chunks) == log.replace(b"hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", b"SECRET1".ljust(35, b"x"))
    again = export_session(tmp_path / "out", tmp_path / "out2", scrub=True)  # a fixture exports as itself
    assert not any(again["placeholders"].values())
    for name in ("recording.jsonl", "journal.jsonl", "spec.yaml"):
        assert (tmp_path / "out2" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()
    assert not (tmp_path / "out" / "controller.lock").exists()


def test_the_model_key_named_by_the_spec_is_hidden_when_set_here(tmp_path, monkeypatch):
    key = "k3y-0f-the-endpoint-771"  # no known shape: only the spec's api_key_env says it is a key
    monkeypatch.setenv("SCRUB_TEST_MODEL_KEY", key)
    run = {"n": 1, "k": "run", "cmd": "env", "cwd": None, "env": None, "timeout": None,
           "result": {"command": "env", "returncode": 0, "stdout": f"HOME=/root\nX={key}\n", "stderr": "",
                      "timed_out": False}}
    d = hand_session(tmp_path / "s1", [run], model={"base_url": "http://127.0.0.1:9/v1", "name": "m",
                                                    "api_key_env": "SCRUB_TEST_MODEL_KEY"})
    assert export_session(d, tmp_path / "out", scrub=True)["placeholders"]["secret"] == 1
    stdout = read_recording(tmp_path / "out" / "recording.jsonl")[0]["result"]["stdout"]
    assert key not in stdout and len(stdout) == len(run["result"]["stdout"])
    monkeypatch.delenv("SCRUB_TEST_MODEL_KEY")
    assert export_session(d, tmp_path / "out2", scrub=True)["placeholders"]["secret"] == 0  # not known: stays


def cli_error(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_bad_input_is_one_line_and_exit_2_and_leaves_nothing_behind(tmp_path):
    home = tmp_path / "home"
    assert "no session 'nosuch'" in cli_error(harness("export", "nosuch", str(tmp_path / "o1"), home=home))
    assert "not a session directory" in cli_error(harness("export", str(tmp_path), str(tmp_path / "o1"), home=home))
    old = hand_session(home / "sessions" / "old", None)
    assert "has no recording" in cli_error(harness("export", "old", str(tmp_path / "o1"), home=home))
    good = hand_session(home / "sessions" / "good", [read_entry(1, 0, b"hello\n")])
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    assert "not an empty directory" in cli_error(harness("export", "good", str(full), home=home))
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    assert "--scrub" in cli_error(harness("export", "good", str(tmp_path / "o1"), "--scrub-word", "x", home=home))
    fd = take_lock(good)  # a controller holds the session
    try:
        mark_holder(fd, os.getpid())
        assert f"pid {os.getpid()}" in cli_error(harness("export", "good", str(tmp_path / "o1"), home=home))
    finally:
        os.close(fd)
    assert not (tmp_path / "o1").exists() and not list(tmp_path.glob(".o1.*")) and old.is_dir()
    empty = tmp_path / "empty"
    empty.mkdir()
    r = harness("export", "good", str(empty), "--scrub", home=home)
    assert r.returncode == 0 and (empty / "fixture.json").is_file(), r.stderr


# -- the evidence: a real session with planted secrets -----------------------------

WANDB = "wandb0f3c9a7e5d1b2468ace13579bdf0"
HF = "hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456"
BEARER = "tok9f8e7d6c5b4a39281706"
SK = "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1"
HOST, USER, WORD, IP = "gpu-node-17", "alicebob", "projzephyr", "10.23.45.67"
PLANTED = [WANDB, HF, BEARER, SK, *KEY_LINES, HOST, USER, WORD, IP]

RUN = "\n".join([f'echo "export HF_TOKEN={HF}"', 'echo "wandb: logged in with $WANDB_API_KEY"',
                 f'echo "Authorization: Bearer {BEARER}"', f"cat <<'KEY'\n{PRIVATE_KEY}KEY",
                 f'echo "ray head at {IP}:6379 for {WORD}"', FAILING])
RULES = [{"when": "No valid rounds", "replies": [
    {"content": f"The config holds the key {SK}; let me look at the cache.",
     "calls": [{"tool": "bash", "args": {"command": f"echo /home/{USER}/.cache/torch USER={USER}"}}]},
    {"calls": [{"tool": "give_up", "args": {"reason": "seen enough"}}]}]}]


def every_byte(directory: Path) -> bytes:
    """All the fixture's bytes, and the bytes its recording's base64 `data` fields encode."""
    out = b"".join(p.read_bytes() for p in sorted(directory.iterdir()))
    rec = read_recording(directory / "recording.jsonl")
    return out + b"".join(base64.b64decode(e["data"]) for e in rec if "data" in e)


def data_lengths(rec: list[dict]) -> list[int]:
    return [len(base64.b64decode(e["data"])) if "data" in e else -1 for e in rec]


def test_planted_secrets_never_appear_in_an_exported_fixture(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text(RUN)
    spec = spec_for(work, host=HOST, user=USER, launch={"env": {"PYTHON": sys.executable, "WANDB_API_KEY": WANDB}})
    d = home / "sessions" / "s-scrub"
    ses = asyncio.run(run_spec(spec, d, model=ScriptedModel(RULES)))
    assert ses.state.ended["reason"] == "gave_up"
    (d / "spec.yaml").write_text(dump_spec(spec))  # frozen as `harness run` does (store.new_session)

    raw = tmp_path / "raw"  # unscrubbed: every planted value really is in the session
    r = harness("export", str(d), str(raw), home=home)
    assert r.returncode == 0 and "NOT scrubbed" in r.stdout and r.stderr.startswith("warning:"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    everything = every_byte(raw)
    assert all(p.encode() in everything for p in PLANTED), [p for p in PLANTED if p.encode() not in everything]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in raw.iterdir())

    out = tmp_path / "fixtures" / "scrubbed"
    r = harness("export", "s-scrub", str(out), "--scrub", "--scrub-word", WORD, home=home)
    assert r.returncode == 0 and len(r.stdout.strip().splitlines()) == 1 and not r.stderr, (r.stdout, r.stderr)
    everything = every_byte(out).lower()
    assert not [p for p in PLANTED if p.lower().encode() in everything]
    assert b"/home/user" in everything and b"export hf_token=secret" in everything

    rec, original = read_recording(out / "recording.jsonl"), read_recording(d / "recording.jsonl")
    assert [(e["n"], e["k"]) for e in rec] == [(e["n"], e["k"]) for e in original]
    assert data_lengths(rec) == data_lengths(original)  # every read's bytes keep their length
    events = Journal.read(out / "journal.jsonl")
    assert [e["type"] for e in events] == [e["type"] for e in Journal.read(d / "journal.jsonl")]
    fixed = load_spec(out / "spec.yaml")
    assert len(fixed.host) == len(HOST) and fixed.user.startswith("user") and fixed.launch.env["WANDB_API_KEY"] != WANDB
    m = json.loads((out / "fixture.json").read_text())
    assert m | {"placeholders": None} == {"format": 1, "session": "s-scrub", "scrubbed": True, "placeholders": None,
                                          "entries": len(original), "events": len(events)}
    assert m["placeholders"]["secret"] >= 6 and all(m["placeholders"][k] >= 1 for k in ("host", "user", "word", "ip"))
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in out.iterdir())
    # and it still replays: the same value has the same placeholder everywhere, of the same length
    r = harness("replay", str(out), home=home)
    assert r.returncode == 0, r.stdout + r.stderr
