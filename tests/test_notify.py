"""Notifications (harness/notify.py): the words for each event, and delivery through the real
apprise library to a real HTTP endpoint on 127.0.0.1 (apprise's json:// and form:// plugins POST
to it). Every socket any of this opens is watched by an audit hook: loopback only."""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.notify import BODY_MAX, TITLE_MAX, Notifier, message_for
from harness.session.journal import Journal
from harness.session.state import State, apply
from names import unique

SID = "20261130-1012-ab12"
SECRET = "s3cr3t-T0ken-9f8e7d"

# ---------------------------------------------------------------------------- the network watch
_CONNECTS: list = []
_WATCHING = threading.Event()


def _audit(event, args):  # process-wide and permanent once added, so it is cheap when idle
    if _WATCHING.is_set() and event in ("socket.connect", "socket.getaddrinfo", "socket.sendto"):
        _CONNECTS.append((event, args[1] if event != "socket.getaddrinfo" else args[0]))


_hooked = False


@pytest.fixture
def loopback_only(monkeypatch):
    """Record every connect/resolve while the test runs; fail if any is not loopback."""
    global _hooked
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)  # a proxy would take the POST off the machine
    _CONNECTS.clear()
    _WATCHING.set()
    yield _CONNECTS
    _WATCHING.clear()
    seen = list(_CONNECTS)
    assert seen, "no connection was seen: the audit hook is not watching"
    for event, where in seen:
        host = where[0] if isinstance(where, tuple) else where
        assert host in ("127.0.0.1", "localhost", "::1"), f"{event} to {where!r}"


class Endpoint:
    """A plain HTTP server on 127.0.0.1 recording each POST (path, headers, decoded body)."""

    def __init__(self, hold: threading.Event | None = None):
        self.got: list[dict] = []
        self.arrived = threading.Event()
        self.hold, self.held_too_long = hold, False
        ep = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                ctype = self.headers.get("Content-Type", "")
                body = json.loads(raw) if "json" in ctype else dict(urllib.parse.parse_qsl(raw))
                ep.got.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                ep.arrived.set()
                if ep.hold is not None and not ep.hold.wait(30):
                    ep.held_too_long = True
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):  # keep the test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.hold is not None:
            self.hold.set()
        self.server.shutdown()
        self.server.server_close()

    def titles(self):
        return [g["body"]["title"] for g in self.got]


@pytest.fixture
def endpoint(loopback_only):
    with Endpoint() as ep:
        yield ep


def drive(tmp_path, notifier, events):
    """Append each (type, fields) to a real journal, fold it, and call the notifier as
    Session.emit calls its ui hook."""
    st = State()
    with Journal(tmp_path / "journal.jsonl") as j:
        for kind, fields in events:
            ev = j.append(kind, **fields)
            apply(st, ev)
            notifier(ev, st)
    return st


def session_events(end: dict):
    """Two attempts: the first reaches stage 3 and fails, the second gets to 5, then `end`."""
    evs = [("session", dict(session=SID, host="box", workdir="/w")),
           ("launch", dict(attempt=1, run_id=f"{SID}-1", pid=1, sha="a"))]
    evs += [("stage", dict(attempt=1, stage=s, name="x")) for s in (1, 2, 3)]
    evs += [("verdict", dict(attempt=1, outcome="crash", last_stage_passed=3, failed_stage=4, reason="failed",
                             exit_code=1, root=None, fingerprint="f1", healthy_updates=0)),
            ("launch", dict(attempt=2, run_id=f"{SID}-2", pid=2, sha="b"))]
    evs += [("stage", dict(attempt=2, stage=s, name="x")) for s in (1, 2, 3, 4, 5)]
    evs += [("verdict", dict(attempt=2, outcome="crash", last_stage_passed=5, failed_stage=6, reason="failed",
                             exit_code=1, root=None, fingerprint="f2", healthy_updates=0)),
            ("end", end)]
    return evs


# ---------------------------------------------------------------------------- the words
def fold(events):
    st = State()
    for i, (kind, fields) in enumerate(events, 1):
        apply(st, {"seq": i, "t": 1000.0 + 60 * i, "type": kind, **fields})
    return st


@pytest.mark.parametrize("end, title, words", [
    (dict(reason="passed", detail="the chain passed on attempt 2"), "chain passed",
     ["passed all 7 stages ✓✓✓✓✓✓✓", "1 relaunch.", f"Next: harness report {SID}"]),
    (dict(reason="stuck", detail="the same failure 3 attempts in a row [f2]: KeyError: final_layernorms.0"),
     "stuck, needs a person", ["The same failure 3 attempts", "final_layernorms.0. Next: harness report"]),
    (dict(reason="budget:tokens", detail="the tokens budget would be exceeded"), "out of budget (tokens)",
     ["13m. The tokens budget would be exceeded. Next: raise budgets.tokens, harness continue"]),
    (dict(reason="gave_up", detail="the weight bridge needs a person"), "needs a person", ["weight bridge"]),
    (dict(reason="stopped", detail="error: ssh: connection lost"), "stopped by an error", ["Error: ssh: connection lost"]),
    (dict(reason="stopped", detail=""), "stopped by an error", ["error"]),
    (dict(reason="error", detail="LedgerError: ledger git commit failed"), "stopped by an error", ["ledger git commit"]),
    (dict(reason="unreachable", detail="box unreachable for 30m00s (connection.grace): timed out"),
     "host unreachable", ["30m00s", "Next: check the host, then harness continue"]),
])
def test_each_way_a_session_ends_has_a_message(end, title, words):
    evs = session_events(end)
    st = fold(evs[:-1])
    msg = message_for({"type": "end", "t": 1000.0 + 60 * len(evs), **end}, st, set())
    assert msg.title == f"harness {SID}: {title}"
    assert "Attempt 2" in msg.body and "13m" in msg.body
    if end["reason"] != "passed":
        assert msg.body.startswith("Attempt 2, furthest stage 5/7 reward, 13m. ")
    for w in words:
        assert w in msg.body
    assert len(msg.title) <= TITLE_MAX and len(msg.body) <= BODY_MAX


def test_a_deliberate_stop_and_ordinary_events_say_nothing():
    st = fold(session_events(dict(reason="passed"))[:-1])
    for detail in ("interrupted", "stopped from the phone (harness stop)"):
        assert message_for({"type": "end", "reason": "stopped", "detail": detail}, st, set()) is None
    for kind in ("session", "launch", "verdict", "model", "tool", "note", "activity", "fix"):
        assert message_for({"type": kind, "attempt": 2}, st, set()) is None


def test_a_stage_is_announced_only_when_further_than_ever_in_the_session():
    seen: set = set()
    st = State(session=SID)
    said = []
    for n, stages in ((1, (1, 2, 3)), (2, (1, 2, 3, 4)), (3, (1, 2)), (4, (1, 2, 3, 4, 5, 6, 7))):
        for s in stages:
            ev = {"type": "stage", "attempt": n, "stage": s, "name": "x"}
            apply(st, ev)
            if m := message_for(ev, st, seen):
                said.append((n, s, m.title))
    assert [(n, s) for n, s, _ in said] == [(1, 1), (1, 2), (1, 3), (2, 4), (4, 5), (4, 6), (4, 7)]
    assert said[0][2] == f"harness {SID}: engine_start reached"
    assert said[-1][2] == f"harness {SID}: actor_update reached"


def test_after_a_resume_stages_reached_before_are_not_announced_again():
    st = fold(session_events(dict(reason="passed"))[:-1])  # the journal of a session that crashed
    ev = {"type": "stage", "attempt": 3, "stage": 4, "name": "trajectory"}
    apply(st, ev)
    assert message_for(ev, st, set()) is None  # `seen` is new (a new controller), the state is not
    ev6 = {"type": "stage", "attempt": 3, "stage": 6, "name": "training_data"}
    assert message_for(ev6, st, set()).body.startswith("Attempt 3 reached stage 6/7 training_data")


def test_messages_fit_a_phone_and_carry_no_secret():
    long_sid = "nightly-" + "x" * 80
    detail = f"error: HF_TOKEN={SECRET} in the env; Authorization: Bearer {SECRET}; " + "blah " * 100
    st = State(session=long_sid)
    for reason in ("passed", "stuck", "gave_up", "budget:money", "stopped"):
        m = message_for({"type": "end", "reason": reason, "detail": detail}, st, set())
        assert len(m.title) <= TITLE_MAX and len(m.body) <= BODY_MAX
        assert m.title.startswith("harness nightly-xx") and "…" in m.title
        if reason == "passed":
            continue
        assert SECRET not in m.title + m.body and "<redacted>" in m.body
        assert m.body.endswith(("harness report", "harness continue", "then continue"))  # what next survives


# ---------------------------------------------------------------------------- delivery
def test_messages_reach_the_endpoint_in_order_with_the_session_named(tmp_path, endpoint):
    warnings: list[str] = []
    n = Notifier([f"json://127.0.0.1:{endpoint.port}/hook"], SID, warn=warnings.append)
    drive(tmp_path, n, session_events(dict(reason="passed", detail="the chain passed on attempt 2")))
    assert n.close(timeout=30)
    assert endpoint.titles() == [f"harness {SID}: {s} reached" for s in
                                 ("engine_start", "completion", "task_dispatch", "trajectory", "reward")] \
        + [f"harness {SID}: chain passed"]
    assert all(g["path"] == "/hook" and SID in g["body"]["title"] for g in endpoint.got)
    assert endpoint.got[3]["body"]["message"].startswith("Attempt 2 reached stage 4/7 trajectory")
    assert [g["body"]["type"] for g in endpoint.got][-1] == "success"
    assert (n.sent, n.failed, warnings) == (6, 0, [])
    n.send("late", "after close")  # dropped, not raised
    assert len(endpoint.got) == 6


def test_a_token_in_the_url_is_used_but_never_printed(tmp_path, endpoint, monkeypatch, caplog, capfd):
    caplog.set_level(logging.DEBUG)  # apprise's own debug logging included
    monkeypatch.setenv("HARNESS_TEST_NOTIFY", f"form://bot:{SECRET}@127.0.0.1:{endpoint.port}/push")
    monkeypatch.delenv("HARNESS_TEST_MISSING", raising=False)
    n = Notifier(["$HARNESS_TEST_NOTIFY", "${HARNESS_TEST_MISSING}", "nosuchscheme://x:" + SECRET + "@h/"], SID)
    assert n.enabled
    drive(tmp_path, n, session_events(dict(reason="gave_up", detail=f"gave up; api_key={SECRET}")))
    assert n.close(timeout=30)
    got = endpoint.got
    assert len(got) == 6 and got[-1]["path"] == "/push"
    assert got[-1]["body"]["title"] == f"harness {SID}: needs a person"
    assert got[0]["auth"].startswith("Basic ")  # the credentials were used…
    out, err = capfd.readouterr()
    printed = out + err + caplog.text + "".join(json.dumps(g["body"]) for g in got)
    assert SECRET not in printed  # …but appear nowhere: not in logs, output, or the messages
    warned = [r.getMessage() for r in caplog.records if r.name == "harness.notify"]
    assert warned == ["notify: $HARNESS_TEST_MISSING is not set; skipping it",
                      "notify: notify entry 3 is not a URL apprise can use; skipping it"]


def test_an_unreachable_endpoint_is_counted_reported_once_and_never_raises(tmp_path, loopback_only, capfd):
    with socket.socket() as dead:  # bound, never listening: connections are refused
        dead.bind(("127.0.0.1", 0))
        warnings: list[str] = []
        n = Notifier([f"json://user:{SECRET}@127.0.0.1:{dead.getsockname()[1]}/"], SID, warn=warnings.append)
        drive(tmp_path, n, session_events(dict(reason="stuck", detail="same failure")))
        assert n.close(timeout=60)
    assert (n.sent, n.failed) == (0, 6)
    assert len(warnings) == 1 and "could not be delivered" in warnings[0]
    out, err = capfd.readouterr()
    assert SECRET not in out + err + warnings[0]
    assert any(ev == "socket.connect" for ev, _ in loopback_only)


def test_sending_never_holds_up_the_caller(loopback_only):
    release = threading.Event()
    with Endpoint(hold=release) as ep:
        n = Notifier([f"json://127.0.0.1:{ep.port}/"], SID)
        n.send("first", "one")
        n.send("second", "two")  # both queued while the endpoint holds the first request
        assert ep.arrived.wait(30)
        assert not release.is_set() and len(ep.got) == 1  # the caller is back; the send is not done
        assert n.flush(timeout=0.05) is False  # bounded: gives up, reports pending
        release.set()
        assert n.close(timeout=30)
    assert [g["body"]["title"] for g in ep.got] == ["first", "second"] and not ep.held_too_long


def test_no_urls_or_only_unset_variables_means_no_apprise_and_no_thread(monkeypatch):
    monkeypatch.delenv("HARNESS_TEST_MISSING", raising=False)
    warnings: list[str] = []
    n = Notifier(["$HARNESS_TEST_MISSING"], SID, warn=warnings.append)
    assert not n.enabled and warnings == ["notify: $HARNESS_TEST_MISSING is not set; skipping it"]
    n({"type": "end", "reason": "passed"}, State(session=SID))
    assert n.close(timeout=1) and n._thread is None
    assert not Notifier([], SID).enabled


def test_a_real_session_notifies_through_the_spec(tmp_path, endpoint, monkeypatch):
    """The controller wired to the spec's notify URL (given as $NAME): minichain with fault 03,
    fixed by its declared fix, reaches every stage and passes; the endpoint hears it all."""
    import asyncio
    import shutil
    import subprocess
    import sys

    from harness.session.runner import run_spec
    from harness.spec import RunSpec
    from test_minichain import TARGET

    work = tmp_path / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    subprocess.run(["git", "apply", str(TARGET / "faults" / "03-token-margin-2048.patch")], cwd=work, check=True)
    monkeypatch.setenv("HARNESS_TEST_NOTIFY", f"json://127.0.0.1:{endpoint.port}/hook")
    spec = RunSpec.model_validate({
        "host": "localhost", "transport": "local", "workdir": str(work), "playbooks": ["minichain"],
        "launch": {"command": "bash run.sh", "env": {"PYTHON": sys.executable}, "settle": 1},
        "notify": ["$HARNESS_TEST_NOTIFY"]})
    sid = unique("s-notify")
    ses = asyncio.run(run_spec(spec, tmp_path / sid, offline=True))
    assert ses.state.passed
    assert endpoint.titles() == [f"harness {sid}: {s} reached" for s in
                                 ("engine_start", "completion", "task_dispatch", "trajectory", "reward",
                                  "training_data", "actor_update")] + [f"harness {sid}: chain passed"]
