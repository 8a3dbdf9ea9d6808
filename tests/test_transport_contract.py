"""The Transport contract (harness/remote/transport.py), one suite for every implementation.

Each test runs against `local`, `asyncssh` (harness.remote.ssh) and `paramiko`
(harness.remote.paramiko_ssh); the SSH ones talk to the `box` sshd of the `ssh_lab` fixture,
which runs on this machine as this user, so tmp_path is the same directory for all three.
An SSH implementation whose module does not exist yet is skipped. `replay` is what a replay
hands the controller: each call made on the local transport, recorded (harness/record.py),
written and read back as JSON, and served by a ReplayTransport (harness/replay/tape.py).

No pytest-asyncio: each test gets its own event loop (`arun` runs a coroutine on it, bounded so a
hung implementation fails instead of hanging) and a transport opened and closed on that loop.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import stat
import time
from pathlib import Path

import pytest

from harness.errors import CommandFailed, CommandTimeout
from harness.record import Recorder, RecordingTransport, read_recording
from harness.replay.tape import ReplayTransport, Tape
from harness.remote.transport import CommandResult, FileStat, HostSpec, Transport, connect

KINDS = ["local", "asyncssh", "paramiko", "replay"]
MODULES = {"asyncssh": "harness.remote.ssh", "paramiko": "harness.remote.paramiko_ssh"}

# "gone" also when only a zombie is left (a reparented child nobody has reaped yet)
GONE = ('p=$(cat {pidfile}); if kill -0 "$p" 2>/dev/null && '
        '! grep -q "^State:[[:space:]]*Z" /proc/"$p"/status 2>/dev/null; then echo alive; else echo gone; fi')


@pytest.fixture(params=KINDS)
def spec(request) -> HostSpec:
    kind = request.param
    if kind in ("local", "replay"):
        return HostSpec(host="localhost", transport="local", extra={"replay": kind == "replay"})
    try:
        importlib.import_module(MODULES[kind])
    except ImportError as e:
        if e.name != MODULES[kind]:
            raise  # the module exists but is broken: fail, don't hide it
        pytest.skip(f"{kind}: {MODULES[kind]} is not written yet")
    lab = request.getfixturevalue("ssh_lab")  # only SSH kinds start (or skip for) the sshd lab
    return HostSpec(host="box", transport=kind, ssh_config=str(lab.ssh_config), known_hosts=str(lab.known_hosts))



class RoundTrip:
    """Each call made live (recorded), then answered by a ReplayTransport from the recording as
    read back from its file: the result, or the exception, a replay would give."""

    def __init__(self, inner, path: Path):
        self.rec, self.path = Recorder(path), path
        self.live, self.tape = RecordingTransport(inner, self.rec), Tape([])
        self.replayed, self.name = ReplayTransport(self.tape, inner.name), inner.name

    async def _both(self, method: str, *args, **kw):
        try:
            await getattr(self.live, method)(*args, **kw)
        except Exception:
            pass  # recorded; the replay raises it again
        finally:
            self.tape.entries.append(read_recording(self.path)[-1])
        return await getattr(self.replayed, method)(*args, **kw)

    async def run(self, cmd, **kw):
        return await self._both("run", cmd, **kw)

    async def read(self, path, offset=0, size=None):
        return await self._both("read", path, offset, size)

    async def write(self, path, data, mode=None):
        return await self._both("write", path, data, mode)

    async def stat(self, path):
        return await self._both("stat", path)

    async def close(self):
        self.rec.close()
        await self.live.close()


@pytest.fixture
def transport(spec, arun, tmp_path_factory):
    t = arun(connect(spec))
    if spec.extra.get("replay"):
        t = RoundTrip(t, tmp_path_factory.mktemp("rec") / "recording.jsonl")
    yield t
    arun(t.close())


def wait_gone(arun, transport, pidfile: Path) -> str:
    """Poll (up to 5 s) through the transport until the pid in `pidfile` no longer runs."""
    assert pidfile.exists() and pidfile.read_text().strip(), "the command never wrote its pid"
    state = "alive"
    for _ in range(50):
        state = arun(transport.run(GONE.format(pidfile=pidfile))).stdout.strip()
        if state == "gone":
            break
        time.sleep(0.1)
    return state


# --- connect ---------------------------------------------------------------------------------

def test_connect_gives_a_transport_named_after_its_kind(transport, spec):
    assert isinstance(transport, Transport)
    assert transport.name == spec.transport


# --- run: results and output -----------------------------------------------------------------

def test_true_and_false(arun, transport):
    ok, bad = arun(transport.run("true")), arun(transport.run("false"))
    assert isinstance(ok, CommandResult) and ok.command == "true"
    assert (ok.returncode, ok.ok, ok.timed_out) == (0, True, False)
    assert (bad.returncode, bad.ok, bad.timed_out) == (1, False, False)


def test_quiet_command_has_empty_output(arun, transport):
    r = arun(transport.run("true"))
    assert (r.stdout, r.stderr) == ("", "")  # no banner, motd or prompt leaks into results


@pytest.mark.parametrize("code", [0, 1, 2, 42, 127, 255])
def test_exit_codes(arun, transport, code):
    assert arun(transport.run(f"exit {code}")).returncode == code


def test_exit_midway_stops_the_command(arun, transport):
    r = arun(transport.run("echo before; exit 7; echo after"))
    assert (r.returncode, r.stdout) == (7, "before\n")
    assert arun(transport.run("echo next")).stdout == "next\n"


def test_stdout_and_stderr_are_separate(arun, transport):
    r = arun(transport.run("echo out1; echo err1 >&2; echo out2; echo err2 >&2"))
    assert r.stdout == "out1\nout2\n"
    assert r.stderr == "err1\nerr2\n"


def test_output_without_trailing_newline_is_exact(arun, transport):
    r = arun(transport.run("printf 'no newline'; printf 'a\\n\\nb' >&2"))
    assert r.stdout == "no newline"
    assert r.stderr == "a\n\nb"


def test_large_stdout_is_intact(arun, transport):
    r = arun(transport.run("yes abcdefghi | head -c 5000000"))
    assert r.ok
    assert len(r.stdout) == 5_000_000
    assert r.stdout == "abcdefghi\n" * 500_000


def test_large_stdout_and_stderr_together_do_not_deadlock(arun, transport):
    r = arun(transport.run("yes o | head -c 2000000; yes e | head -c 2000000 >&2; echo done"))
    assert r.ok
    assert r.stdout == "o\n" * 1_000_000 + "done\n"
    assert r.stderr == "e\n" * 1_000_000


def test_non_utf8_bytes_are_replaced_not_fatal(arun, transport):
    r = arun(transport.run("printf '\\377\\376ok\\n'; printf 'bad\\300' >&2"))
    assert r.ok
    assert r.stdout.endswith("ok\n") and "\ufffd" in r.stdout
    assert r.stderr.startswith("bad") and "\ufffd" in r.stderr


def test_multibyte_utf8_split_across_reads_decodes(arun, transport):
    r = arun(transport.run("yes 'é€😀' | head -n 200000"))
    assert r.stdout == "é€😀\n" * 200_000


def test_sentinel_lookalike_output_does_not_confuse(arun, transport):
    noise = "__HARNESS_END__0\n__HARNESS_END__ 1\n__END__\n__EXIT__=0\n"
    r = arun(transport.run(f"printf '{noise}'; printf '{noise}' >&2; echo after; exit 5"))
    assert (r.returncode, r.stdout, r.stderr) == (5, noise + "after\n", noise)
    assert arun(transport.run("echo next")).stdout == "next\n"


# --- run: environment, directory, shell --------------------------------------------------------

def test_env_is_honoured(arun, transport):
    r = arun(transport.run('echo "$HARNESS_T_FOO"; echo "$HOME"', env={"HARNESS_T_FOO": "bar"}))
    lines = r.stdout.splitlines()
    assert lines[0] == "bar"
    assert lines[1], "env adds to the environment, it does not replace it"


def test_env_values_are_taken_literally(arun, transport):
    tricky = "a b 'c' \"d\" $HOME \\ `id` ; * | & $(echo no)"
    r = arun(transport.run('printf "%s" "$HARNESS_T_TRICKY"', env={"HARNESS_T_TRICKY": tricky}))
    assert r.stdout == tricky


def test_env_does_not_leak_into_the_next_command(arun, transport):
    arun(transport.run("true", env={"HARNESS_T_LEAK": "1"}))
    assert arun(transport.run('echo "${HARNESS_T_LEAK:-unset}"')).stdout == "unset\n"


def test_cwd_is_honoured(arun, transport, tmp_path):
    r = arun(transport.run("pwd -P", cwd=str(tmp_path)))
    assert r.stdout.strip() == str(tmp_path.resolve())


def test_default_cwd_is_the_login_directory(arun, transport):
    r = arun(transport.run('test "$(pwd -P)" = "$(cd "$HOME" && pwd -P)" && echo home'))
    assert r.stdout == "home\n"


def test_missing_cwd_fails_without_running(arun, transport, tmp_path):
    r = arun(transport.run("echo ran", cwd=str(tmp_path / "nope")))
    assert r.returncode not in (0, None) and not r.ok
    assert "ran" not in r.stdout
    with pytest.raises(CommandFailed):
        arun(transport.run("echo ran", cwd=str(tmp_path / "nope"), check=True))


def test_commands_are_isolated(arun, transport, tmp_path):
    arun(transport.run(f"cd {tmp_path}; export HARNESS_T_X=1; HARNESS_T_Y=2"))
    r = arun(transport.run('pwd -P; echo "${HARNESS_T_X:-unset} ${HARNESS_T_Y:-unset}"'))
    assert r.stdout.splitlines()[0] != str(tmp_path.resolve())
    assert r.stdout.splitlines()[1] == "unset unset"


def test_pipes_and_substitution(arun, transport):
    r = arun(transport.run('echo abc | tr a-z A-Z; echo "$(echo inner)-$((1 + 2))"'))
    assert r.stdout == "ABC\ninner-3\n"


def test_quotes_and_backslashes(arun, transport):
    r = arun(transport.run(r"""printf '%s\n' 'it'"'"'s' "say \"hi\"" 'back\slash' "a\\b" '$HOME'"""))
    assert r.stdout == "it's\nsay \"hi\"\nback\\slash\na\\b\n$HOME\n"


def test_newlines_inside_the_command(arun, transport):
    r = arun(transport.run("echo one\nif true; then\n  echo two\nfi\nprintf '%s\\n' 'three\nfour'"))
    assert r.stdout == "one\ntwo\nthree\nfour\n"


def test_stdin_is_empty(arun, transport):
    r = arun(transport.run("cat; read x || echo eof", timeout=10))
    assert (r.timed_out, r.stdout) == (False, "eof\n")


# --- run: check ------------------------------------------------------------------------------

def test_check_passes_the_result_through(arun, transport):
    r = arun(transport.run("echo hi", check=True))
    assert r.ok and r.stdout == "hi\n"


def test_check_raises_command_failed(arun, transport):
    cmd = "echo first; echo last-out; echo last-err >&2; exit 3"
    with pytest.raises(CommandFailed) as info:
        arun(transport.run(cmd, check=True))
    assert not isinstance(info.value, CommandTimeout)
    assert info.value.result.returncode == 3 and info.value.result.command == cmd
    message = str(info.value)
    assert cmd in message and "exit status 3" in message
    assert "last-out" in message and "last-err" in message


# --- run: timeouts ---------------------------------------------------------------------------

def test_fast_command_within_timeout(arun, transport):
    r = arun(transport.run("echo quick", timeout=10))
    assert r.ok and not r.timed_out and r.stdout == "quick\n"


def test_timeout_keeps_partial_output(arun, transport):
    start = time.monotonic()
    r = arun(asyncio.wait_for(transport.run("echo partial; echo e-partial >&2; sleep 30", timeout=1), 15))
    assert time.monotonic() - start < 15
    assert (r.timed_out, r.returncode, r.ok) == (True, None, False)
    assert "partial" in r.stdout and "e-partial" in r.stderr


def test_timeout_with_check_raises_command_timeout(arun, transport):
    with pytest.raises(CommandTimeout) as info:
        arun(asyncio.wait_for(transport.run("echo partial; sleep 30", timeout=1, check=True), 15))
    assert info.value.result.timed_out and "partial" in info.value.result.stdout
    assert "timed out" in str(info.value)


def test_timeout_kills_the_command(arun, transport, tmp_path):
    pidfile = tmp_path / "pid"
    r = arun(asyncio.wait_for(transport.run(f"echo $$ > {pidfile}; exec sleep 30", timeout=1.5), 15))
    assert r.timed_out
    assert wait_gone(arun, transport, pidfile) == "gone"


def test_timeout_kills_the_whole_process_group(arun, transport, tmp_path):
    pidfile = tmp_path / "child"
    r = arun(asyncio.wait_for(transport.run(f"sleep 30 & echo $! > {pidfile}; wait", timeout=1.5), 15))
    assert r.timed_out
    assert wait_gone(arun, transport, pidfile) == "gone"


def test_timeout_kills_a_command_that_ignores_sigterm(arun, transport, tmp_path):
    pidfile = tmp_path / "stubborn"
    cmd = f"trap '' TERM; sleep 30 & echo $! > {pidfile}; wait; wait"
    r = arun(asyncio.wait_for(transport.run(cmd, timeout=1.5), 20))
    assert r.timed_out
    assert wait_gone(arun, transport, pidfile) == "gone"


def test_transport_works_after_a_timeout(arun, transport):
    assert arun(transport.run("sleep 30", timeout=1)).timed_out
    r = arun(transport.run("echo alive"))
    assert r.ok and r.stdout == "alive\n"


# --- run: concurrency ------------------------------------------------------------------------

def test_concurrent_runs_keep_their_own_output(arun, transport):
    async def many():
        return await asyncio.gather(*(
            transport.run(f"sleep 0.{i % 4}; echo out-{i}; echo err-{i} >&2; exit {i}") for i in range(20)))

    for i, r in enumerate(arun(many())):
        assert (r.returncode, r.stdout, r.stderr) == (i, f"out-{i}\n", f"err-{i}\n")


# --- read --------------------------------------------------------------------------------------

@pytest.fixture
def sample(tmp_path) -> Path:
    p = tmp_path / "sample.bin"
    p.write_bytes(bytes(range(256)) * 4)  # 1024 bytes, every byte value
    return p


def test_read_whole_file(arun, transport, sample):
    assert arun(transport.read(str(sample))) == sample.read_bytes()


def test_read_from_an_offset(arun, transport, sample):
    assert arun(transport.read(str(sample), offset=1000)) == sample.read_bytes()[1000:]


def test_read_with_size(arun, transport, sample):
    assert arun(transport.read(str(sample), size=10)) == bytes(range(10))
    assert arun(transport.read(str(sample), offset=250, size=10)) == bytes([250, 251, 252, 253, 254, 255, 0, 1, 2, 3])
    assert arun(transport.read(str(sample), offset=1020, size=100)) == bytes([252, 253, 254, 255])


def test_read_beyond_eof_is_empty(arun, transport, sample):
    assert arun(transport.read(str(sample), offset=1024)) == b""
    assert arun(transport.read(str(sample), offset=5000)) == b""


def test_read_missing_file_raises_file_not_found(arun, transport, tmp_path):
    with pytest.raises(FileNotFoundError):
        arun(transport.read(str(tmp_path / "missing")))


def test_read_large_binary(arun, transport, tmp_path):
    data = os.urandom(3_000_000)
    (tmp_path / "big").write_bytes(data)
    assert arun(transport.read(str(tmp_path / "big"))) == data


def test_read_large_at_an_offset_with_a_size(arun, transport, tmp_path):
    """A backlog read (paramiko streams reads over 1 MiB through a shell): every byte value, lines
    shaped like the shell framing's markers, an offset and a size that cut inside them."""
    data = (os.urandom(700_000) + b"\n__hx0123456789abcdef0\n__hx0123456789abcdef<\n") * 4
    (tmp_path / "big").write_bytes(data)
    assert arun(transport.read(str(tmp_path / "big"), offset=123_457, size=2_000_001)) == data[123_457:2_123_458]
    assert arun(transport.read(str(tmp_path / "big"), offset=1_500_000)) == data[1_500_000:]
    assert arun(transport.read(str(tmp_path / "big"), offset=len(data), size=2_000_000)) == b""


def test_read_of_a_directory_raises_is_a_directory(arun, transport, tmp_path):
    with pytest.raises(IsADirectoryError):
        arun(transport.read(str(tmp_path)))


# --- write -------------------------------------------------------------------------------------

def test_write_round_trips(arun, transport, tmp_path):
    for name, data in [("text", b"hello\nworld\n"), ("empty", b""), ("bin", os.urandom(2_000_000))]:
        arun(transport.write(str(tmp_path / name), data))
        assert (tmp_path / name).read_bytes() == data
        assert arun(transport.read(str(tmp_path / name))) == data


def test_write_replaces_an_existing_file_without_leftovers(arun, transport, tmp_path):
    target = tmp_path / "dir" / "config.yaml"
    target.parent.mkdir()
    target.write_bytes(b"old content that is longer than the new one\n")
    arun(transport.write(str(target), b"new\n"))
    assert target.read_bytes() == b"new\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["config.yaml"]  # no temp file left


def test_write_applies_mode(arun, transport, tmp_path):
    arun(transport.write(str(tmp_path / "run.sh"), b"#!/bin/sh\necho hi\n", mode=0o750))
    assert stat.S_IMODE((tmp_path / "run.sh").stat().st_mode) == 0o750
    arun(transport.write(str(tmp_path / "run.sh"), b"#!/bin/sh\necho hey\n", mode=0o600))
    assert stat.S_IMODE((tmp_path / "run.sh").stat().st_mode) == 0o600


def test_write_without_mode_keeps_the_mode_of_the_replaced_file(arun, transport, tmp_path):
    script = tmp_path / "launch.sh"
    script.write_bytes(b"#!/bin/sh\n")
    script.chmod(0o755)
    arun(transport.write(str(script), b"#!/bin/sh\necho patched\n"))
    assert stat.S_IMODE(script.stat().st_mode) == 0o755  # a patched launch script stays executable


def test_write_into_a_missing_directory_raises_file_not_found(arun, transport, tmp_path):
    with pytest.raises(FileNotFoundError):
        arun(transport.write(str(tmp_path / "no" / "such" / "file"), b"x"))
    assert not (tmp_path / "no").exists()


# --- stat --------------------------------------------------------------------------------------

def test_stat_of_a_file(arun, transport, sample):
    sample.chmod(0o640)
    st = arun(transport.stat(str(sample)))
    assert isinstance(st, FileStat)
    assert (st.size, st.is_dir) == (1024, False)
    assert abs(st.mtime - sample.stat().st_mtime) < 1.01  # SFTP mtimes are whole seconds
    assert stat.S_IMODE(st.mode) == 0o640


def test_stat_of_a_missing_path_is_none(arun, transport, tmp_path):
    assert arun(transport.stat(str(tmp_path / "missing"))) is None
    assert arun(transport.stat(str(tmp_path / "missing" / "deeper"))) is None


def test_stat_of_a_directory(arun, transport, tmp_path):
    st = arun(transport.stat(str(tmp_path)))
    assert st is not None and st.is_dir
