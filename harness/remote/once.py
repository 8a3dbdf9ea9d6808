"""Commands that must not run twice, made safe to send again after a dropped connection.

    ops = Ops("/w", "20261201-2130-ab12/3f9a")   # one per controller process
    r = await transport.run(ops("git commit …"), timeout=60)   # r: the command's own result

The reconnecting layer (reconnect.py) sends a call again when its connection dropped, and a
command may have run (or still be running) on the host by then. A guarded command claims its op
first (its `.pid` file, created exclusively: atomic) and runs with its output going to files
beside it, so a dropped connection neither kills it (no SIGPIPE) nor loses what it printed; its
exit status is written last. Sent again, the same guarded text finds the op taken and attaches
instead: it waits for the first run and answers with that run's output and status, so the
command runs once. If the first run ended without a status (killed), the repeat says so on
stderr and exits 125. A repeat that is timed out kills the first run's process group (its TERM
trap). The guard costs about 3 ms of shell over the command (one `sh` and one `cat`; the record
before it is removed in the background).

Ops live in `<workdir>/.harness/ops/<session>/` (the agent's policy keeps `.harness/`
read-only); each guarded command removes the record of the one before it (whose answer has
arrived), and `Ops.clear_command()` the session's at its end.
"""

from __future__ import annotations

import shlex

INTERRUPTED = 125  # the status of a repeat whose first run ended without one

# The record of op $_hd is four files beside it: .pid (created exclusively: the claim), .out,
# .err, .rc. The guard's names start with _h: an exported B, C, D or P of the user's stays as it is.
GUARD = r'''
_hout() { [ ! -s "$_hd.out" ] || cat "$_hd.out"; [ ! -s "$_hd.err" ] || cat "$_hd.err" >&2; }
[ -z "$_hp" ] || rm -f "$_hp.pid" "$_hp.out" "$_hp.err" "$_hp.rc" </dev/null >/dev/null 2>&1 &
# no place for the record (the workdir is missing or read-only): run the command as it is
{ [ -d "$_hb" ] && { [ -d "${_hd%/*}" ] || mkdir -p "${_hd%/*}" 2>/dev/null; }; } || exec /bin/sh -c "$_hc" </dev/null
set -C
if { echo $$ > "$_hd.pid"; } 2>/dev/null; then
  set +C
  trap '_hrc=143' TERM
  /bin/sh -c "$_hc" >"$_hd.out" 2>"$_hd.err" </dev/null; _hrc=${_hrc:-$?}
  echo "$_hrc" > "$_hd.rc"
else
  set +C
  trap 'p=$(cat "$_hd.pid" 2>/dev/null); [ -n "$p" ] && { kill -TERM -"$p" 2>/dev/null || kill -TERM "$p"; }; exit 143' TERM
  i=0
  while [ ! -s "$_hd.rc" ]; do
    p=; [ ! -s "$_hd.pid" ] || read -r p < "$_hd.pid"
    if [ -n "$p" ]; then kill -0 "$p" 2>/dev/null || break; elif [ $i -ge 100 ]; then break; fi
    i=$((i+1)); sleep 0.1
  done
  if [ ! -s "$_hd.rc" ]; then
    _hout; echo "harness: the connection dropped while this command ran, and it ended without an exit status (killed?); what it printed is above" >&2
    exit @INTERRUPTED@
  fi
  read -r _hrc < "$_hd.rc"
fi
_hout; exit "$_hrc"
'''.replace("@INTERRUPTED@", str(INTERRUPTED))


def guard(cmd: str, op_dir: str, base: str, done: str = "") -> str:
    """`cmd` wrapped so that sending it twice runs it once (see the module docstring). The
    record is kept in `op_dir`.*, under `base` (the workdir), which is never created: without it
    the command runs unguarded and fails (or not) on its own. `done`: the record of an earlier
    command whose answer has arrived, removed first."""
    return f"_hb={shlex.quote(base)}; _hd={shlex.quote(op_dir)}; _hp={shlex.quote(done)}; _hc={shlex.quote(cmd)}\n{GUARD}"


class Ops:
    """Op directories for one controller process: `ops(cmd)` guards `cmd` with the next one.
    `prefix` must differ between controller processes (a killed one's directories stay until
    `clear`) and be the same in a replay (it is recorded)."""

    def __init__(self, workdir: str, session: str, process: str):
        self.workdir = workdir.rstrip("/") or "/"
        self.root = f"{self.workdir.rstrip('/')}/.harness/ops/{session}"
        self.process, self.n = process, 0

    def __call__(self, cmd: str) -> str:
        """The guarded `cmd`. Guarded commands are sent one at a time, so the one before has its
        answer by now and its record is removed in the same round trip."""
        self.n += 1
        done = f"{self.root}/{self.process}-{self.n - 1}" if self.n > 1 else ""
        return guard(cmd, f"{self.root}/{self.process}-{self.n}", self.workdir, done)

    def clear_command(self) -> str:
        """The command that removes the session's op directories (none may be in use)."""
        return f"rm -rf {shlex.quote(self.root)}"
