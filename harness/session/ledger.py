"""The ledger: every attempt's workdir, committed into a shadow git directory on the host.

    ledger = Ledger(transport, "/w", "20250101-120000-ab12")
    sha = await ledger.snapshot(3, "attempt 3: 2/7 crash -> running")   # refs/harness/<session>/3
    await ledger.annotate(3, "attempt 3: 2/7 crash -> 5/7 crash")       # same tree, new message
    print(await ledger.diff())                                           # first attempt -> latest
    await ledger.restore(1)                                              # `harness undo --to 1`

The git directory is `<workdir>/.harness/ledger.git` with its own index, so the user's repository
(if the workdir is one), its branches, index, stash and config are never read or written, and the
workdir need not be a repository. Git runs on the host through the Transport, a few round trips
per call, with the system and global config shut out (no hooks, no signing, no filters, no
autocrlf, no global excludes) so a snapshot records the files exactly as they are.

Git refuses to look inside a nested repository (a clone of verl or vLLM in the workdir), which is
where the agent's patches usually go; the ledger stages each one with a worktree and index of its
own and grafts its tree in at its path, so those files are recorded like any other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shlex
from typing import Sequence

from ..errors import BadInput, LedgerError
from ..remote.procs import shell_vars

LEDGER = ".harness/ledger.git"
ALWAYS_EXCLUDED = (".harness/", "__pycache__/", "*.pyc")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*\Z")  # also a valid ref component
_UNBORN = re.compile(r"error: '(.+?)/?' does not have a commit checked out")
_NO_GIT = "harness-ledger: git not found"
_NO_DIR = "harness-ledger: no directory"
READS = ("list", "diff", "show")  # scripts that change nothing: sent again as they are, unguarded

# Every script starts here. `g` is git on the ledger: WT is the worktree (the workdir, or a
# nested repository in it), IDX its index. LC_ALL=C: git's messages are matched in English.
PRELUDE = r'''
command -v git >/dev/null 2>&1 || { echo "harness-ledger: git not found" >&2; exit 127; }
unset GIT_DIR GIT_WORK_TREE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_COMMON_DIR GIT_NAMESPACE
WT=${WT:-$WD}
export LC_ALL=C GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_INDEX_FILE="${IDX:-$GD/index}"
g() { git --git-dir="$GD" --work-tree="$WT" -c user.name=harness -c user.email=harness@localhost \
  -c core.autocrlf=false -c core.hooksPath=/dev/null -c core.excludesFile=/dev/null -c core.quotePath=false \
  -c commit.gpgSign=false -c safe.directory='*' -c advice.addEmbeddedRepo=false "$@"; }
commit() { sha=$(g commit-tree "$T" ${P:+-p "$P"} -m "$MSG") && g update-ref "$REF" "$sha" ${OLD:+"$OLD"} && echo "$sha"; }
cd "$WT" 2>/dev/null || { echo "harness-ledger: no directory $WT" >&2; exit 3; }
set -e
'''
# Queries on a ledger never created answer nothing rather than creating it.
EXISTING = '[ -f "$GD/HEAD" ] || exit 0\n'

# .harness/.gitignore keeps the harness's own area out of the user's `git status`.
INIT = r'''
mkdir -p .harness
[ -e .harness/.gitignore ] || printf '*\n' > .harness/.gitignore
[ -f "$GD/HEAD" ] || git init -q --bare "$GD" >/dev/null
mkdir -p "$GD/info" "$GD/subindex"
printf '%s\n' @PATTERNS@ > "$GD/info/exclude"
'''

# Stage WT into IDX; print its tree, then the nested repositories git recorded as gitlinks
# (mode 160000), NUL-separated (newlines and NULs are swapped around grep, which reads lines).
# With REF set and no nested repository, commit the tree at once (COMMIT, below) and print
# "commit <sha>" instead: a snapshot of a plain workdir is one round trip.
ADD = r'''
g add -A -- . @SKIP@
T=$(g write-tree); echo "$T"
if [ -n "$REF" ] && ! g ls-files -s | grep -q '^160000 '; then
  c=$(commit); echo "commit $c"; exit 0
fi
g ls-files -s -z | tr '\n\0' '\0\n' | grep '^160000 ' | tr '\n\0' '\0\n'
'''
# Replace whatever IDX holds at P (a gitlink) with the tree T staged from that nested repository.
GRAFT = r'''
g rm -r -f -q --cached --ignore-unmatch -- ":(literal)$P"
g read-tree --prefix="$P/" "$T"
g write-tree
'''
# Commit tree T (parent P, if any) as REF, print its sha; OLD: the commit REF must hold now.
COMMIT = 'commit\n'
# Before a snapshot, in the same round trip: the previous attempt's new message (NMSG; its tree
# NT, parent NP, commit NOLD), committed as NREF, becomes the snapshot's parent P ("note <sha>").
NOTE = r'''
P=$(T=$NT P=$NP MSG=$NMSG REF=$NREF OLD=$NOLD commit); echo "note $P"
'''
ANNOTATE = r'''
old=$(g rev-parse --verify "$REF^{commit}")
args=; for p in $(g rev-parse "$old^@"); do args="$args -p $p"; done
sha=$(g commit-tree "$(g rev-parse "$old^{tree}")" $args -m "$MSG")
g update-ref "$REF" "$sha" "$old"
echo "$sha"
'''
LIST = EXISTING + "g for-each-ref --format='%(refname)%00%(objectname)%00%(contents)%00' \"$PREFIX\"\n"
# What restoring T removes: files the ledger put in the workdir (its index: the last snapshot or
# restore) or recorded last (L) that T lacks; then "/" (never a path); then, with T loaded into
# the ledger index, the files that differ from it in the workdir. All -z.
PLAN = r'''
g diff-index --cached -z --name-only --no-renames --diff-filter=A "$T"
g diff-tree -r -z --name-only --no-renames --diff-filter=D "$L" "$T"
printf '/\0'
g read-tree "$T"
g update-index -q --refresh >/dev/null 2>&1 || true
g diff-files -z --name-only
'''
# Remove the listed files (never a directory, never through a symlinked directory: it may lead
# out of the workdir), then their parent directories left empty, then write out every file of
# the index; print the files removed (-z).
APPLY = r'''
xargs -0 sh -c 'up() { case $1 in */*) d=${1%/*};; *) d=.;; esac; }
for p; do
  up "$p"; while [ "$d" != . ] && [ ! -L "$d" ]; do up "$d"; done; [ "$d" = . ] || continue
  { [ -e "$p" ] || [ -L "$p" ]; } && { [ -L "$p" ] || [ ! -d "$p" ]; } || continue
  rm -f -- "$p" && printf "%s\0" "$p" || continue
  up "$p"; while [ "$d" != . ] && rmdir -- "$d" 2>/dev/null; do up "$d"; done
done; exit 0' sh < "$GD/restore.list"
g checkout-index -a -f -u
'''


def _z(text: str) -> list[str]:
    return [p for p in text.split("\0") if p]


class Ledger:
    def __init__(self, transport, workdir: str, session: str, exclude: Sequence[str] = (), *,
                 timeout: float = 600.0, once=None):
        """`once(cmd)` (once.Ops) guards every git script: sent again after a dropped connection,
        a commit attaches to the one still running instead of racing it for the index lock."""
        if not workdir.startswith("/"):
            raise BadInput(f"the ledger needs an absolute workdir, got {workdir!r}")
        if not _NAME.match(session) or session.endswith(".lock"):
            raise BadInput(f"session name {session!r}: use letters, digits, '.', '_' and '-'")
        if bad := [p for p in exclude if not p.strip() or "\n" in p or "\r" in p]:
            raise BadInput(f"ledger exclude patterns must be one non-blank line each, got {bad!r}")
        self.t, self.session, self.timeout = transport, session, timeout
        self.once = once or (lambda cmd: cmd)
        self.workdir = workdir.rstrip("/") or "/"
        self.git_dir = f"{self.workdir.rstrip('/')}/{LEDGER}"
        self.exclude = (*ALWAYS_EXCLUDED, *exclude)
        self._ready = False
        # What this ledger wrote, kept: the controller holding the session's lock is its refs' only
        # writer, so after one listing it needs no other (a new Ledger, on resume, lists again).
        self._rows: list[tuple[int, str, str]] | None = None
        self._trees: dict[int, str] = {}  # attempt -> the tree its snapshot committed
        self._parents: dict[int, str] = {}  # attempt -> its snapshot's parent ("" for none), when this ledger made it
        self._staged: str | None = None  # the tree changed_since staged, for the next snapshot

    # ------------------------------------------------------------------ the public calls
    async def snapshot(self, attempt: int, message: str, note: tuple[int, str] | None = None) -> str:
        """Commit the workdir's whole state as refs/harness/<session>/<attempt>, its parent the
        commit of the previous attempt; returns the commit's sha. `note`: (the previous attempt,
        its new message), annotated first in the same round trip. The tree the last
        `changed_since` staged is committed as it is: the controller asks that as the agent's
        turn ends, and snapshots when it launches the next attempt, with nothing in between."""
        ref = self._ref(attempt)
        await self._init()
        earlier = [(n, sha) for n, sha, _ in await self.attempts() if n < attempt]
        parent = earlier[-1][1] if earlier else ""
        extra: dict[str, str] = {}
        if note and earlier and note[0] == earlier[-1][0]:  # (a note on any other attempt is dropped)
            n0 = note[0]
            if n0 in self._parents:  # this ledger made it: its tree and parent are known
                extra = dict(NT=self._trees[n0], NP=self._parents[n0], NMSG=note[1], NREF=self._ref(n0), NOLD=parent)
            else:
                parent = await self.annotate(*note)
        tree, self._staged = self._staged, None
        sha = noted = ""
        values = dict(P=parent, MSG=message, REF=ref)
        if tree is None:
            tree, sha, noted = await self._stage("", commit=values, note=extra)
        if not sha:  # the tree changed_since staged, or one with nested repositories grafted in
            folded = bool(extra) and not noted
            r = await self._sh((NOTE if folded else "") + COMMIT, "commit", T=tree,
                               **(values | {"P": noted} if noted else values), **(extra if folded else {}))
            noted, out = self._noted(r.stdout) if folded else (noted, r.stdout)
            sha = out.strip()
        if extra:
            self._remember(note[0], noted, note[1])
            parent = noted
        self._remember(attempt, sha, message)
        self._trees[attempt], self._parents[attempt] = tree, parent
        return sha

    @staticmethod
    def _noted(stdout: str) -> tuple[str, str]:
        """(the sha NOTE printed on the first line, the rest of the output)."""
        head, _, rest = stdout.partition("\n")
        if not head.startswith("note "):
            raise LedgerError(f"ledger annotate printed no commit: {head[:200]!r}")
        return head.split()[1], rest

    async def annotate(self, attempt: int, message: str) -> str:
        """Give attempt `attempt` a new message (same tree, same parent); returns the new sha."""
        old = self._sha(await self.attempts(), attempt)
        if attempt in self._parents:  # snapshotted by this ledger: its tree and parent are known
            r = await self._sh(COMMIT, "annotate", T=self._trees[attempt], P=self._parents[attempt], MSG=message,
                               REF=self._ref(attempt), OLD=old)
        else:
            r = await self._sh(ANNOTATE, "annotate", REF=self._ref(attempt), MSG=message)
        sha = r.stdout.strip()
        self._remember(attempt, sha, message)
        return sha

    def _remember(self, attempt: int, sha: str, message: str) -> None:
        if self._rows is not None and sha:
            self._rows = sorted([row for row in self._rows if row[0] != attempt]
                                + [(attempt, sha, message.split("\n", 1)[0])])

    async def changed_since(self, attempt: int) -> bool:
        """Whether the workdir differs from attempt `attempt`'s snapshot (True when it has none).
        The tree staged is kept for the next snapshot."""
        self._staged = None
        rows = {n: sha for n, sha, _ in await self.attempts()}
        if attempt not in rows:
            return True
        await self._init()
        tree, _, _ = await self._stage("")
        self._staged = tree
        if attempt not in self._trees:
            self._trees[attempt] = (await self._sh('g rev-parse "$C^{tree}"\n', "diff", C=rows[attempt])).stdout.strip()
        return self._trees[attempt] != tree

    async def recover(self) -> None:
        """Remove git lock files a killed controller left in the ledger (only the controller
        holding the session's lock calls this, when it resumes the session)."""
        d = shlex.quote(self.git_dir)
        await self.t.run(self.once(f"rm -f {d}/index.lock; [ -d {d}/refs ] && find {d}/refs -name '*.lock' -delete; true"),
                         timeout=60)

    async def attempts(self) -> list[tuple[int, str, str]]:
        """(attempt, sha, first line of its message) for each snapshot of this session, ascending."""
        if self._rows is not None:
            return list(self._rows)
        r = await self._sh(LIST, "list", PREFIX=f"refs/harness/{self.session}/")
        fields = r.stdout.split("\0")
        rows = []
        for ref, sha, message in zip(fields[0::3], fields[1::3], fields[2::3]):
            n = ref.strip().rsplit("/", 1)[-1]
            if n.isdigit():
                rows.append((int(n), sha, message.split("\n", 1)[0]))
        self._rows = sorted(rows)
        return list(self._rows)

    async def diff(self, base: int | None = None, to: int | None = None) -> str:
        """The unified diff between two attempts' snapshots (default: the first -> the latest)."""
        a, b = await self._pair(base, to)
        return (await self._sh('g diff-tree -r -p --no-color "$A" "$B"\n', "diff", A=a, B=b)).stdout

    async def changed_files(self, base: int | None = None, to: int | None = None) -> list[str]:
        """The paths (relative to the workdir) that differ between two attempts' snapshots."""
        a, b = await self._pair(base, to)
        r = await self._sh('g diff-tree -r -z --name-only --no-renames "$A" "$B"\n', "diff", A=a, B=b)
        return _z(r.stdout)

    async def file_at(self, attempt: int, rel: str) -> str | None:
        """A file's text (relative to the workdir) as attempt `attempt`'s snapshot holds it; None
        when the snapshot lacks it."""
        sha = self._sha(await self.attempts(), attempt)
        r = await self._sh('g cat-file -e "$C:$F" 2>/dev/null || exit 4\ng cat-file blob "$C:$F"\n', "show",
                           check=False, C=sha, F=rel.lstrip("/"))
        return None if r.returncode == 4 else self._check(r, "show").stdout

    async def restore(self, attempt: int) -> list[str]:
        """Make the workdir's files equal attempt `attempt`'s snapshot: its files are written
        back; files it lacks that the latest snapshot (or the last restore) holds are removed.
        Files never recorded (new ones, ignored ones, .harness/) are left alone. Returns the
        paths changed."""
        self._staged = None
        rows = await self.attempts()
        target, latest = self._sha(rows, attempt), rows[-1][1]
        await self._init()
        plan = (await self._sh(PLAN, "restore", T=target, L=latest)).stdout
        gone, _, differ = plan.partition("/\0")
        doomed = sorted({p for p in _z(gone) if not p.startswith(".harness/")})
        await self.t.write(f"{self.git_dir}/restore.list", "".join(p + "\0" for p in doomed).encode())
        removed = _z((await self._sh(APPLY, "restore")).stdout)
        return sorted({*_z(differ), *removed})

    # ------------------------------------------------------------------ staging
    async def _stage(self, rel: str, commit: dict | None = None, note: dict | None = None) -> tuple[str, str, str]:
        """Stage the worktree `rel` (the workdir when "", else a nested repository in it) into its
        own index; returns the tree sha, with every nested repository's files grafted in, "" and
        "" — or, given `commit` (COMMIT's P, MSG, REF) and no nested repository, the sha of the
        commit made of it in the same round trip; with `note` (NOTE's values), the sha NOTE made
        last, which is then that commit's parent."""
        wt = f"{self.workdir}/{rel}" if rel else self.workdir
        idx = f"{self.git_dir}/subindex/{hashlib.sha1(rel.encode()).hexdigest()}" if rel else ""
        skip: list[str] = []  # nested repositories with no commit: `git add` fails on them
        noted = ""
        while True:
            pathspecs = " ".join(shlex.quote(f":(literal,exclude){p}") for p in skip)
            values = {} if skip else (commit or {}) | (note or {})  # a retry only stages
            script = (NOTE if "NREF" in values else "") + ADD.replace("@SKIP@", pathspecs)
            r = await self._sh(script, "add", check=False, WT=wt, IDX=idx, **values)
            if "NREF" in values and r.stdout.startswith("note "):  # annotated, whatever the add did next
                noted, out = self._noted(r.stdout)
                r = dataclasses.replace(r, stdout=out)
            m = None if r.ok else _UNBORN.search(r.stderr)
            if m and m.group(1) not in skip:
                skip.append(m.group(1))
                continue
            self._check(r, "add")
            break
        tree, _, links = r.stdout.partition("\n")
        if links.startswith("commit "):
            return tree.strip(), links.split()[1], noted
        for path in skip + [rec.split("\t", 1)[1] for rec in _z(links)]:
            sub, _, _ = await self._stage(f"{rel}/{path}" if rel else path)
            tree = (await self._sh(GRAFT, "add", WT=wt, IDX=idx, P=path, T=sub)).stdout.strip()
        return tree.strip(), "", noted

    async def _init(self) -> None:
        if not self._ready:
            patterns = " ".join(shlex.quote(p) for p in self.exclude)
            await self._sh(INIT.replace("@PATTERNS@", patterns), "init")
            self._ready = True

    # ------------------------------------------------------------------ helpers
    def _ref(self, attempt: int) -> str:
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
            raise BadInput(f"attempt must be a whole number >= 0, got {attempt!r}")
        return f"refs/harness/{self.session}/{attempt}"

    def _sha(self, rows: list[tuple[int, str, str]], attempt: int) -> str:
        self._ref(attempt)
        for n, sha, _ in rows:
            if n == attempt:
                return sha
        have = ", ".join(str(n) for n, _, _ in rows) or "none"
        raise BadInput(f"session {self.session} has no attempt {attempt} in the ledger of "
                       f"{self.workdir} (attempts: {have})")

    async def _pair(self, base: int | None, to: int | None) -> tuple[str, str]:
        rows = await self.attempts()
        if not rows:
            raise BadInput(f"session {self.session} has no snapshots in the ledger of {self.workdir}")
        return (self._sha(rows, rows[0][0] if base is None else base),
                self._sha(rows, rows[-1][0] if to is None else to))

    async def _sh(self, script: str, what: str, check: bool = True, **values: str):
        cmd = shell_vars(GD=self.git_dir, WD=self.workdir, **values) + PRELUDE + script
        r = await self.t.run(cmd if what in READS else self.once(cmd), timeout=self.timeout)
        return self._check(r, what) if check else r

    def _check(self, r, what: str):
        if r.ok:
            return r
        host = getattr(self.t, "name", "the host")
        if r.timed_out:
            raise LedgerError(f"ledger {what} timed out after {self.timeout:.0f}s in {self.workdir} on {host}; "
                              f"exclude large directories from the ledger (ledger.exclude in the spec)")
        if r.returncode == 127 and _NO_GIT in r.stderr:
            raise LedgerError(f"git is not installed on {host}; install git on the host (the ledger needs it)")
        if r.returncode == 3 and _NO_DIR in r.stderr:
            raise LedgerError(f"{self.workdir} does not exist on {host}; check the workdir in the spec")
        hint = (f"; if no other harness session uses this workdir, remove {self.git_dir}/index.lock"
                if "index.lock" in r.stderr else "")
        lines = r.stderr.strip().splitlines()  # git's own error/fatal lines, not its advice around them
        tail = "\n".join(([ln for ln in lines if ln.startswith(("fatal:", "error:"))] or lines)[-5:])
        raise LedgerError(f"ledger git {what} failed in {self.workdir} on {host} "
                          f"(exit {r.returncode}){hint}" + (f"\n{tail}" if tail else ""))
