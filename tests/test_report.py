"""The session report from real journals: sessions run by the real controller on this machine
(LocalTransport, real processes, real git), one stuck and one passing after a declared fix.
The Markdown says the key facts; the HTML opens in headless Chromium (a screenshot at phone
width with the matrix's colours in it, and the rendered DOM holding the facts) and references
nothing outside itself; secrets planted in the journal appear in neither; `harness report`
still renders when the host cannot be reached."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import zlib
from html import escape
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.agent.scripted import ScriptedModel
from harness.remote.local import LocalTransport
from harness.report import markdown
from harness.report_html import html
from harness.session.controller import Session
from harness.session.journal import Journal
from harness.session.ledger import Ledger
from harness.spec import dump_spec, load_spec
from test_loop import LOOK_AND_RELAUNCH, TARGET, failing_workdir, spec_for

# the module fixture is built once: its tests share one xdist worker
pytestmark = pytest.mark.xdist_group("test_report")

HARNESS = Path(sys.executable).parent / "harness"
CHROMIUM = "/usr/bin/chromium"
SECRET = "hf_" + "Zq7Lm2Xp9Rt4" * 3  # a token shape redact() knows; made here so no file holds one


def _run(home: Path, sid: str, spec, model, expect: str) -> Path:
    """A real session under HARNESS_HOME (frozen spec + journal), as `harness run` leaves it."""
    d = home / "sessions" / sid
    d.mkdir(parents=True)
    (d / "spec.yaml").write_text(dump_spec(spec), encoding="utf-8")
    reason = asyncio.run(Session(spec, d, LocalTransport(), model).run())
    assert reason == expect, (d / "journal.jsonl").read_text()[-3000:]
    return d


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    home = root / "home"
    stuck = _run(home, "a-stuck", spec_for(failing_workdir(root), budgets={"stuck_after": 3}),
                 ScriptedModel(LOOK_AND_RELAUNCH), "stuck")
    work = root / "minichain"
    shutil.copytree(TARGET, work, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    subprocess.run(["git", "apply", str(TARGET / "faults" / "03-token-margin-2048.patch")], cwd=work, check=True)
    passed = _run(home, "b-passed", spec_for(work, launch={"settle": 1}), ScriptedModel([]), "passed")
    diff = asyncio.run(Ledger(LocalTransport(), str(work), "b-passed").diff())
    return SimpleNamespace(root=root, home=home, stuck=stuck, passed=passed, diff=diff)


def journal(d: Path) -> list[dict]:
    return Journal.read(d / "journal.jsonl")


def harness(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")} | {"HARNESS_HOME": str(home)}
    return subprocess.run([str(HARNESS), *args], capture_output=True, text=True, env=env, timeout=300)


def test_a_stuck_session_in_markdown(lab):
    events = journal(lab.stuck)
    assert events[-1]["reason"] == "stuck", events[-1]
    md = markdown(events, "")
    tokens = sum(e["prompt_tokens"] + e["completion_tokens"] for e in events if e["type"] == "model")
    assert "**chain not passed (stuck)**: attempt 3 stopped with crash at engine_start, 0/7 stages passed\n" in md
    assert "- attempts: 3 (2 relaunches)" in md and f"- model: 4 calls, {tokens} tokens" in md
    assert "- human interventions: 0" in md and "- files changed: 0" in md
    assert md.count("| ✗ | · | · | · | · | · | · |") == 3  # the matrix: three rows failing at stage 1
    rows = [ln for ln in md.splitlines() if re.match(r"\| [123] \| passed 0/7: `ValueError: No valid rounds", ln)]
    assert len(rows) == 3 and "agent relaunched: try again" in rows[0]
    assert rows[2].endswith("| — | crash at engine_start |")
    assert re.search(r"- `\+\d+:\d\d:\d\d` \*\*end\*\* session ended: stuck — the same failure 3 attempts in a row", md)
    assert md.count("**relaunch** agent: try again") == 2 and md.count("**launch** attempt") == 3
    assert "No change: the workdir is as the session found it." in md


def test_a_passing_session_in_markdown_with_its_diff(lab):
    md = markdown(journal(lab.passed), lab.diff)
    assert "**chain passed** on attempt 2\n" in md
    assert "- files changed: 1 (+1 −1 lines): config.yaml" in md
    assert "- attempts: 2 (1 relaunch)" in md
    assert "| 1 | ✓ | ✗ | · | · | · | · | · |" in md and "| 2 | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ |" in md
    assert re.search(r"\| 1 \| passed 1/7 \(engine_start\): `Prompt length exceeds max_model_len[^|]*` \| "
                     r"config.yaml: rollout.token_margin 2048 -> 16384 \| crash at completion \|", md), md
    assert "| 2 | passed 7/7 (actor_update) | — | pass |" in md
    assert "**fix** declared fix: config.yaml: rollout.token_margin 2048 -> 16384" in md
    diff = md.split("```diff\n", 1)[1].split("\n```", 1)[0]
    assert "-  token_margin: 2048" in diff and "+  token_margin: 16384" in diff
    # without the diff (the end of `harness run` writes report.md so) it says where to get it
    bare = markdown(journal(lab.passed))
    assert "files changed: 1 (from the journal: the diff was not read): config.yaml" in bare
    assert "The cumulative diff is not included; `harness diff b-passed` shows it" in bare


def test_an_attempt_whose_stage_nothing_places_reads_as_assumed(tmp_path):
    """A run that dies of an error whose message names no stage's work, with no traceback, before
    any stage marker: the journal's verdict says its stage is the lifecycle's (`stage_basis`), and
    the report's matrix row and the agent's first line say the stage was assumed, not found."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text("echo 'RuntimeError: the frobnicator gave up' >&2\nexit 1\n")  # no traceback
    d = _run(tmp_path / "home", "c-assumed", spec_for(work), ScriptedModel([]), "gave_up")
    verdicts = [e for e in journal(d) if e["type"] == "verdict"]
    assert [(v["failed_stage"], v["stage_basis"]) for v in verdicts] == [(1, "lifecycle")], verdicts
    md = markdown(journal(d), "")
    assert "attempt 1 stopped with crash at engine_start (stage assumed), 0/7 stages passed" in md, md
    # and the agent is told so in the first line it reads
    from harness.session.state import fold
    from harness.session.turn import opening
    first = opening(fold(journal(d)), verdicts[0], "## chain", 1).splitlines()[0]
    assert first.startswith("Attempt 1 failed at engine_start (crash; stage assumed: nothing in the log places it). "
                            "Root cause: RuntimeError: the frobnicator gave up"), first
    assert re.search(r"\| 1 \| passed 0/7: `RuntimeError: the frobnicator gave up` \|[^|]*\| crash at engine_start "
                     r"\(stage assumed\) \|", md), md


def test_a_resumed_session_and_unknown_events(lab, tmp_path):
    """The stuck session resumed by the real controller (as `harness continue` does): a person
    intervened and the session ran on; then a stop somebody asked for, and an event type the
    report does not know, shown by its words."""
    d = tmp_path / "sessions" / "a-stuck"
    shutil.copytree(lab.stuck, d)
    ses = Session(load_spec(d / "spec.yaml"), d, LocalTransport(), ScriptedModel(LOOK_AND_RELAUNCH))
    assert asyncio.run(ses.run()) == "stuck"
    events = journal(d)
    at = next(i for i, e in enumerate(events) if e["type"] == "continue")
    launched = next(i for i, e in enumerate(events) if e["type"] == "launch" and e["attempt"] == 4)
    assert "**running**: attempt 4 under way, furthest 0/7" in markdown(events[:launched + 1])
    md = markdown(events[:at + 1], "")
    assert "**running**: 3 attempt(s) done, furthest 0/7 stages so far\n" in md and "- ended: still running" in md
    assert "- human interventions: 1: resumed by a person after stuck" in md
    with Journal(d / "journal.jsonl") as j:
        j.append("frobnicate", text="a later kind of event")
        j.append("end", reason="stopped", detail="stopped by the user")
        j.append("end", reason="stopped", detail="")  # the controller failing is nobody's intervention
        events = j.events()
    md = markdown(events, "")
    assert "**chain not passed (stopped)**: attempt 6 stopped with crash at engine_start" in md
    assert "- attempts: 6 (5 relaunches)" in md and md.count("| ✗ | · | · | · | · | · | · |") == 6
    assert "- human interventions: 2: resumed by a person after stuck; " \
           "session ended: stopped — stopped by the user" in md
    assert "**continue** resumed by a person after stuck" in md and "**frobnicate** a later kind of event" in md


def test_the_report_command(lab):
    """Markdown on stdout by default (the latest session), files with --md/--html; the diff is
    read from the ledger on the host."""
    r = harness("report", home=lab.home)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert "**chain passed** on attempt 2" in r.stdout and "+  token_margin: 16384" in r.stdout
    md, page = lab.root / "r.md", lab.root / "r.html"
    r = harness("report", "a-stuck", "--md", str(md), "--html", str(page), home=lab.home)
    assert r.returncode == 0 and r.stdout == f"wrote {md}\nwrote {page}\n", r.stdout + r.stderr
    stuck_diff = asyncio.run(Ledger(LocalTransport(), str(lab.root / "work"), "a-stuck").diff())
    assert "+tried again" in stuck_diff and md.read_text() == markdown(journal(lab.stuck), stuck_diff)
    assert page.read_text().startswith("<!DOCTYPE html>") and "chain not passed (stuck)" in page.read_text()
    bad = harness("report", "a-stuck", "--md", str(lab.root / "no" / "dir.md"), home=lab.home)
    assert bad.returncode == 2 and bad.stderr.startswith("error: cannot write") and len(bad.stderr.splitlines()) == 1


def test_the_report_renders_when_the_host_cannot_be_reached(lab, tmp_path):
    with socket.socket() as s:  # a port nothing listens on: the connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    d = tmp_path / "home" / "sessions" / "b-passed"
    shutil.copytree(lab.passed, d)
    spec = spec_for(Path("/nowhere"), host="127.0.0.1", port=port, transport="asyncssh")
    (d / "spec.yaml").write_text(dump_spec(spec), encoding="utf-8")
    r = harness("report", "b-passed", home=tmp_path / "home")
    assert r.returncode == 0, r.stderr
    assert "**chain passed** on attempt 2" in r.stdout and "files changed: 1 (from the journal" in r.stdout
    assert re.search(r"The cumulative diff is unavailable: cannot connect to 127\.0\.0\.1.*refused", r.stdout)
    assert len(r.stderr.splitlines()) == 1 and "unavailable" in r.stderr


def _planted(lab, tmp_path: Path) -> list[dict]:
    """The stuck journal with the secret in each kind of text a report shows."""
    shutil.copy(lab.stuck / "journal.jsonl", tmp_path / "journal.jsonl")
    with Journal(tmp_path / "journal.jsonl") as j:
        token = f"HF_TOKEN={SECRET}"
        j.append("tool", attempt=3, step=1, name="bash", arguments=f'{{"command": "echo {token}"}}', refused=False,
                 end=None, summary="", output=f"exit status 0\n{token}")
        j.append("tool", attempt=3, step=2, name="relaunch", arguments="{}", refused=False, end="relaunch",
                 summary=f"exported {token} for the download", output="relaunch")
        j.append("fix", attempt=3, fingerprint="f", signature="s", kind="set_env", applied=True,
                 description=f"env {token}", files=[], env={}, unset=[])
        j.append("note", attempt=3, text=f"see https://example.com/x?{token} <script>alert(1)</script>")
        j.append("verdict", attempt=4, outcome="crash", last_stage_passed=2, failed_stage=3, reason="exited",
                 exit_code=1, root={"text": f"401 Unauthorized for {token}"}, fingerprint="g", healthy_updates=0)
        j.append("end", reason="gave_up", detail=token)
        return j.events()


def test_no_secret_in_either_format(lab, tmp_path):
    events = _planted(lab, tmp_path)
    diff = lab.diff + f"diff --git a/.env b/.env\n--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-x\n+HF_TOKEN={SECRET}\n"
    for text in (markdown(events, diff), html(events, diff), markdown(events), html(events, None, diff_error=SECRET)):
        assert SECRET not in text and SECRET[3:15] not in text
        assert "HF_TOKEN=" in text  # the name stays, so a reader sees what was there


def chromium() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: scripts/test.sh should have installed Debian's chromium package")
        pytest.skip("chromium not installed (bash scripts/test.sh installs Debian's chromium package)")
    return CHROMIUM


def browse(page: Path, profile: Path, *args: str, size: str = "412,915") -> subprocess.CompletedProcess:
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", f"--window-size={size}", *args, page.as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


def png_colours(data: bytes) -> tuple[int, int, set[bytes]]:
    """(width, height, the RGB colours) of an 8-bit RGB/RGBA PNG, decoded with zlib alone."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body, pos = data[pos + 8:pos + 8 + size], pos + 12 + size
        head = struct.unpack(">IIBBBBB", body) if kind == b"IHDR" else head
        idat += body if kind == b"IDAT" else b""
    w, h, depth, ctype, _, _, interlace = head
    assert depth == 8 and ctype in (2, 6) and not interlace, head
    bpp, raw, colours = (3 if ctype == 2 else 4), zlib.decompress(idat), set()
    stride, prev = w * (3 if ctype == 2 else 4), bytearray(w * 4)
    for y in range(h):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):  # undo the row filter (PNG spec, section 9)
            a, b = (line[i - bpp] if i >= bpp else 0), prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                a = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            add = {0: 0, 1: a, 2: b, 3: (a + b) // 2, 4: a}[kind]
            line[i] = (line[i] + add) & 0xFF
        colours.update(bytes(line[i:i + 3]) for i in range(0, stride, bpp))
        prev = line
    return w, h, colours


def test_the_html_report_in_headless_chromium(lab, tmp_path):
    from harness.report_html import CSS

    shutil.copy(lab.passed / "journal.jsonl", tmp_path / "journal.jsonl")
    with Journal(tmp_path / "journal.jsonl") as j:  # text that must stay text
        j.append("note", attempt=2, text='proxy http://10.0.0.1:3128 <img src="https://evil.example/x.png"><script>')
        events = j.events()
    page = tmp_path / "report.html"
    page.write_text(html(events, lab.diff), encoding="utf-8")
    text = page.read_text(encoding="utf-8")
    # self-contained: no tag fetches or links anything; the URLs in the text are escaped text
    for tag in re.findall(r"<[^>]*>", text):
        assert not re.search(r"\b(src|srcset|action|data)=|url\(|@import", tag, re.I), tag
        assert not re.match(r"<(script|link|img|iframe|object|embed|base)\b", tag, re.I), tag
        assert not re.search(r"href=\"(?!#)", tag), tag
    assert "http://10.0.0.1:3128 &lt;img src=&quot;https://evil.example/x.png&quot;&gt;&lt;script&gt;" in text
    assert not re.search(r"https?:|url\(|@import", CSS)
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
    assert min(int(px) for px in re.findall(r"font-size:(\d+)px", CSS)) >= 14

    shot = tmp_path / "phone.png"
    browse(page, tmp_path / "profile", f"--screenshot={shot}")
    data = shot.read_bytes()
    assert len(data) > 10_000
    w, h, colours = png_colours(data)
    assert (w, h) == (412, 915) and len(colours) > 50  # text, not a blank page
    for mark in ("ok", "fail"):  # the matrix is on the first screen, coloured
        rgb = re.search(rf"td\.{mark}\{{background:#(\w{{6}})", CSS).group(1)
        assert bytes.fromhex(rgb) in colours, f"no {mark} cell (#{rgb}) on the screenshot"

    dom = browse(page, tmp_path / "profile", "--dump-dom").stdout
    assert "<h1>harness session b-passed</h1>" in dom
    assert '<p class="headline passed">chain passed on attempt 2</p>' in dom
    assert dom.count('<td class="fail">✗</td>') == 1 and dom.count('<td class="ok">✓</td>') == 8
    assert "config.yaml: rollout.token_margin 2048 -&gt; 16384" in dom and "crash at completion" in dom
    assert "+  token_margin: 16384" in dom and "<script" not in dom and "<img" not in dom


FIXTURE_JOURNAL = Path(__file__).resolve().parent.parent / "fixtures" / "sessions" / "all-faults" / "journal.jsonl"
LONG = "/opt/very/long/path/" + "x" * 180 + "/checkpoint_without_any_break.safetensors"


def _night() -> list[dict]:
    """The recorded all-faults session, with a hang's evidence and unbroken long words added."""
    events = Journal.read(FIXTURE_JOURNAL)
    hung = next(i for i, e in enumerate(events) if e["type"] == "verdict" and e["outcome"] == "hang")
    events.insert(hung + 1, {"seq": 0, "t": events[hung]["t"], "type": "evidence", "attempt": 7,
                             "text": "3 processes of the run\n  pid 23987 S 0.00s CPU/s wait do_wait bash run.sh\n"
                                     "  pid 23990 S 0.00s CPU/s futex python -m minichain.agent " + LONG})
    events.insert(-1, {"seq": 0, "t": events[-2]["t"], "type": "note", "attempt": 11, "text": "loaded " + LONG})
    return events


@pytest.mark.parametrize("width", [412, 1280])
def test_the_html_report_fits_a_phone_and_a_desktop_without_sideways_scrolling(tmp_path, width):
    events = _night()
    page = tmp_path / "report.html"
    page.write_text(html(events, "diff --git a/x b/x\n+" + LONG + "\n"), encoding="utf-8")
    assert "<script" not in page.read_text()
    # the page in a frame of that width (headless windows are 500px at least), and one line of
    # script that writes the page's widths where --dump-dom shows them
    probe = tmp_path / "probe.html"
    probe.write_text(f'<!DOCTYPE html><html><head><title>?</title></head><body style="margin:0">'
                     f'<iframe style="border:0" width="{width}" height="900" srcdoc="{escape(page.read_text())}">'
                     "</iframe><script>window.onload = function () { var f = document.querySelector('iframe'); "
                     "document.title = 'W=' + f.contentDocument.documentElement.scrollWidth + ',' + "
                     "f.contentWindow.innerWidth; };</script></body></html>")
    dom = browse(probe, tmp_path / "profile", "--dump-dom", size=f"{width + 40},900").stdout
    scroll, inner = map(int, re.search(r"<title>W=(\d+),(\d+)</title>", dom).groups())
    assert inner == width and scroll <= inner, f"the page is {scroll}px wide in a {inner}px window"
    shot = tmp_path / f"report-{width}.png"
    browse(page, tmp_path / "profile", f"--screenshot={shot}", size=f"{width},2400")
    w, h, colours = png_colours(shot.read_bytes())
    print(f"screenshot at {width}px: {shot}")
    assert w == width and len(colours) > 50
    from harness.report_html import HARNESS as GREY, MODEL, REACHED
    for colour in (REACHED[-1], REACHED[3], GREY):  # the time bars are drawn (pass, hang at trajectory, harness)
        assert bytes.fromhex(colour[1:]) in colours, f"no {colour} bar on the screenshot"
    text = page.read_text()
    assert "<h2>Where it hung</h2>" in text and "futex python -m minichain.agent" in text
    assert text.count('<rect ') >= 11 * 2 and MODEL in text  # a bar per attempt, in parts
    cards = re.findall(r'<td data-label="what it saw">', text)
    assert len(cards) == 11  # a narrow screen labels each cell of its card


def test_the_markdown_report_fits_40_columns_and_keeps_its_tables_when_wide(tmp_path):
    events = _night()
    diff = "diff --git a/config.yaml b/config.yaml\n+  token_margin: 16384\n"
    narrow = markdown(events, diff, width=40)
    body, _, tail = narrow.partition("```diff")
    assert all(len(ln) <= 40 for ln in body.splitlines() + tail.split("```", 1)[1].splitlines()), \
        [ln for ln in narrow.splitlines() if len(ln) > 40][:3]
    assert "|" not in body.replace("\\|", "")  # no table
    assert "### attempt 11" in narrow and "+  token_margin: 16384" in narrow and "11 ✓✓✓✓✓✓✓ pass" in narrow
    wide = markdown(events, diff)
    assert "| attempt | what it saw |" in wide and wide == markdown(events, diff, width=120)
    r = subprocess.run([str(HARNESS), "report", "--width", "40", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--width" in r.stdout


def test_sessions_lists_the_newest_first_in_40_columns(tmp_path):
    home = tmp_path / "home"
    for i, sid in enumerate(["20261101-010101-aaaa", "20261102-010101-bbbb", "20261201-010101-cccc"]
                            + [f"20261202-0000{n:02d}-dddd" for n in range(10)]):
        d = home / "sessions" / sid
        d.mkdir(parents=True)
        lines = FIXTURE_JOURNAL.read_text().splitlines()
        if i == 1:  # one that ran out of its wall-clock budget
            lines = [ln for ln in lines if '"type":"end"' not in ln]
            lines.append('{"seq": 999, "t": 1796183990.0, "type": "end", "reason": "budget:wall_clock", "detail": ""}')
        (d / "journal.jsonl").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "HARNESS_HOME": str(home)}
    out = subprocess.run([str(HARNESS), "sessions"], capture_output=True, text=True, env=env).stdout.splitlines()
    assert len(out) == 11 and out[-1] == "(3 older: --all)"
    assert out[0] == "20261202-000009-dddd 7/7 #11 passed" and out[9].startswith("20261202-000000-dddd")
    every = subprocess.run([str(HARNESS), "sessions", "--all"], capture_output=True, text=True, env=env).stdout
    assert len(every.splitlines()) == 13 and all(len(ln) <= 40 for ln in every.splitlines())
    assert every.splitlines()[-1].startswith("20261101-010101-aaaa") and "20261102-010101-bbbb 7/7 #11 over time" in every
