"""The shadow git ledger (harness/session/ledger.py) with the real git, through LocalTransport on
temporary workdirs, and once through the real loopback sshd."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

from harness.errors import BadInput, LedgerError
from harness.remote.local import LocalTransport
from harness.remote.transport import HostSpec
from harness.session.ledger import Ledger

ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | {
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "LC_ALL": "C"}


def ugit(cwd, *args) -> str:
    """The user's own git in `cwd` (not the ledger's)."""
    p = subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", "-c", "init.defaultBranch=main",
                        *args], cwd=cwd, env=ENV, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def lgit(workdir, *args) -> str:
    """Read the ledger's git directory directly, to check what it holds."""
    return ugit(workdir, f"--git-dir={workdir}/.harness/ledger.git", *args)


def run(coro):
    return asyncio.run(coro)


def write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def tree_of(workdir, attempt, session="s1") -> list[str]:
    return lgit(workdir, "ls-tree", "-r", "--name-only", f"refs/harness/{session}/{attempt}").splitlines()


@pytest.fixture
def wd(tmp_path):
    w = tmp_path / "work"
    write(w, {"train.py": "lr = 1\n", "conf/a.yaml": "x: 1\n", "data/keep.txt": "k\n",
              "pkg/__pycache__/m.cpython-311.pyc": "bin", "pkg/m.pyc": "bin", "ckpt/big.bin": "weights"})
    return w


def test_snapshots_a_plain_directory_with_excludes_and_parents(wd):
    led = Ledger(LocalTransport(), str(wd), "s1", exclude=["ckpt/"])
    assert led.git_dir == f"{wd}/.harness/ledger.git"
    assert run(led.attempts()) == [] and not (wd / ".harness").exists()  # a query creates nothing
    sha1 = run(led.snapshot(1, "attempt 1: start\n\nbody"))
    assert sorted(tree_of(wd, 1)) == ["conf/a.yaml", "data/keep.txt", "train.py"]
    assert not (wd / ".git").exists()  # the workdir did not become a repository
    write(wd, {"train.py": "lr = 2\n", "new/file.py": "print(1)\n"})
    (wd / "data/keep.txt").unlink()
    sha2 = run(led.snapshot(2, "attempt 2"))
    assert run(led.attempts()) == [(1, sha1, "attempt 1: start"), (2, sha2, "attempt 2")]
    assert lgit(wd, "rev-parse", f"{sha2}^").strip() == sha1
    assert lgit(wd, "log", "-1", "--format=%an <%ae>%n%B", sha1) == "harness <harness@localhost>\nattempt 1: start\n\nbody\n\n"
    assert run(led.changed_files()) == ["data/keep.txt", "new/file.py", "train.py"]
    diff = run(led.diff())
    assert "-lr = 1\n+lr = 2\n" in diff and "+print(1)" in diff and "diff --git a/data/keep.txt" in diff
    assert run(led.diff(2, 2)) == "" and run(led.changed_files(to=1)) == []
    # attempt 3 with nothing changed still gets its own commit, parented on attempt 2
    sha3 = run(led.snapshot(3, "attempt 3"))
    assert lgit(wd, "rev-parse", f"{sha3}^").strip() == sha2 and run(led.changed_files(2, 3)) == []
    assert run(led.file_at(1, "data/keep.txt")) == "k\n" and run(led.file_at(2, "data/keep.txt")) is None
    assert run(led.file_at(2, "new/file.py")) == "print(1)\n"
    with pytest.raises(BadInput, match="no attempt 7"):
        run(led.file_at(7, "train.py"))


def test_annotate_keeps_tree_and_parent(wd):
    led = Ledger(LocalTransport(), str(wd), "s1")
    sha1 = run(led.snapshot(1, "one"))
    write(wd, {"train.py": "lr = 3\n"})
    sha2 = run(led.snapshot(2, "attempt 2: 1/7 -> running"))
    new = run(led.annotate(2, "attempt 2: 1/7 -> 5/7 crash\n\nafter: fp"))
    assert new != sha2 and run(led.attempts())[-1] == (2, new, "attempt 2: 1/7 -> 5/7 crash")
    assert lgit(wd, "rev-parse", f"{new}^{{tree}}", f"{new}^") == lgit(wd, "rev-parse", f"{sha2}^{{tree}}", f"{sha2}^")
    assert lgit(wd, "rev-parse", f"{new}^").strip() == sha1
    sha3 = run(led.snapshot(3, "three"))
    assert lgit(wd, "rev-parse", f"{sha3}^").strip() == new  # the next attempt builds on the annotated one
    with pytest.raises(BadInput, match="no attempt 9.*attempts: 1, 2, 3"):
        run(led.annotate(9, "x"))


def test_annotate_by_a_new_ledger_reads_tree_and_parent_from_the_commit(wd):
    # a resumed controller's ledger did not make the snapshot: it reads tree and parent on the host
    sha1 = run(Ledger(LocalTransport(), str(wd), "s1").snapshot(1, "one"))
    write(wd, {"train.py": "lr = 4\n"})
    sha2 = run(Ledger(LocalTransport(), str(wd), "s1").snapshot(2, "two -> running"))
    new = run(Ledger(LocalTransport(), str(wd), "s1").annotate(2, "two -> crash"))
    assert lgit(wd, "rev-parse", f"{new}^{{tree}}", f"{new}^") == lgit(wd, "rev-parse", f"{sha2}^{{tree}}", f"{sha2}^")
    assert lgit(wd, "rev-parse", f"{new}^").strip() == sha1 and lgit(wd, "log", "-1", "--format=%s", new) == "two -> crash\n"


def test_annotate_refuses_a_ref_moved_by_someone_else(wd):
    led = Ledger(LocalTransport(), str(wd), "s1")
    run(led.snapshot(1, "one"))
    other = run(Ledger(LocalTransport(), str(wd), "s1").annotate(1, "someone else"))
    with pytest.raises(LedgerError, match="annotate failed"):
        run(led.annotate(1, "mine"))  # this ledger still holds the old sha: update-ref refuses
    assert lgit(wd, "rev-parse", "refs/harness/s1/1").strip() == other


def test_the_tree_changed_since_staged_is_the_next_snapshot(wd):
    led = Ledger(LocalTransport(), str(wd), "s1")
    run(led.snapshot(1, "one"))
    assert run(led.changed_since(1)) is False
    write(wd, {"train.py": "lr = 5\n"})  # the agent edits on after "nothing changed"
    assert run(led.changed_since(1)) is True
    run(led.snapshot(2, "two"))
    assert lgit(wd, "show", "refs/harness/s1/2:train.py") == "lr = 5\n"
    write(wd, {"train.py": "lr = 6\n"})  # a declared fix: no changed_since before the snapshot
    run(led.snapshot(3, "three"))
    assert lgit(wd, "show", "refs/harness/s1/3:train.py") == "lr = 6\n"


def test_restore_brings_back_modified_and_deleted_files_and_removes_added_ones(wd):
    odd = "we ird 'q' $HOME;.py"
    write(wd, {odd: "odd\n", "-dash.py": "dash\n", "run.sh": "echo hi\n"})
    (wd / "run.sh").chmod(0o755)
    os.symlink("train.py", wd / "link.py")
    led = Ledger(LocalTransport(), str(wd), "s1", exclude=["ckpt/"])
    run(led.snapshot(1, "one"))
    write(wd, {"train.py": "lr = 9\n", "added/deep/x.py": "x\n", odd: "changed\n"})
    (wd / "conf/a.yaml").unlink()
    (wd / "-dash.py").unlink()
    (wd / "run.sh").chmod(0o644)
    (wd / "link.py").unlink()
    os.symlink("conf", wd / "link.py")
    run(led.snapshot(2, "two"))
    write(wd, {"untracked.txt": "never snapshotted\n", "train.py": "lr = 10\n"})  # after the last snapshot
    write(wd, {".harness/mine": "harness\n", "pkg/__pycache__/n.pyc": "bin"})

    changed = run(led.restore(1))

    assert changed == sorted(["-dash.py", "added/deep/x.py", "conf/a.yaml", "link.py", odd, "run.sh", "train.py"])
    assert (wd / "train.py").read_text() == "lr = 1\n" and (wd / "conf/a.yaml").read_text() == "x: 1\n"
    assert (wd / odd).read_text() == "odd\n" and (wd / "-dash.py").read_text() == "dash\n"
    assert os.access(wd / "run.sh", os.X_OK) and os.readlink(wd / "link.py") == "train.py"
    assert not (wd / "added").exists()  # the added file and the directories it left empty
    assert (wd / "untracked.txt").read_text() == "never snapshotted\n"  # never recorded: left alone
    assert (wd / ".harness/mine").exists() and (wd / "pkg/__pycache__/n.pyc").exists()
    assert (wd / "ckpt/big.bin").read_text() == "weights"
    assert run(led.restore(1)) == []  # already there
    # forward again: undo the undo
    assert "added/deep/x.py" in run(led.restore(2))
    assert (wd / "added/deep/x.py").read_text() == "x\n" and (wd / "train.py").read_text() == "lr = 9\n"
    assert not (wd / "-dash.py").exists() and not os.access(wd / "run.sh", os.X_OK)
    assert os.readlink(wd / "link.py") == "conf"


def test_restore_never_removes_through_a_symlinked_directory(wd, tmp_path):
    outside = tmp_path / "outside"
    write(outside, {"x.py": "not the workdir's\n"})
    led = Ledger(LocalTransport(), str(wd), "s1")
    run(led.snapshot(1, "one"))
    write(wd, {"added/x.py": "x\n"})
    run(led.snapshot(2, "two"))
    (wd / "added/x.py").unlink()
    (wd / "added").rmdir()
    os.symlink(outside, wd / "added")
    assert "added/x.py" not in run(led.restore(1))
    assert (outside / "x.py").read_text() == "not the workdir's\n"


def test_a_users_repository_is_left_untouched(wd):
    ugit(wd, "init", "-q")
    ugit(wd, "add", "-A")
    ugit(wd, "commit", "-qm", "base")
    ugit(wd, "checkout", "-qb", "feature")
    write(wd, {"train.py": "lr = 5\n"})
    ugit(wd, "stash", "-q")
    write(wd, {"conf/a.yaml": "x: 2\n", "notes.txt": "staged new file\n"})
    ugit(wd, "add", "conf/a.yaml", "notes.txt")
    write(wd, {"train.py": "lr = 6\n"})  # unstaged change
    ugit(wd, "config", "hook.x", "y")

    def user_view():
        return (ugit(wd, "status", "--porcelain=v2", "--branch", "--untracked-files=all"),
                ugit(wd, "ls-files", "--stage"), ugit(wd, "diff", "--cached"), ugit(wd, "stash", "list"),
                ugit(wd, "rev-parse", "stash@{0}", "HEAD"), ugit(wd, "for-each-ref"),
                (wd / ".git/config").read_bytes(), sorted(os.listdir(wd / ".git/refs/heads")))
    before = user_view()
    led = Ledger(LocalTransport(), str(wd), "s1")
    run(led.snapshot(1, "one"))
    assert not any(p == ".git" or p.startswith(".git/") for p in tree_of(wd, 1))
    assert "notes.txt" in tree_of(wd, 1)  # the workdir as it is, staged or not
    write(wd, {"train.py": "lr = 7\n", "extra.py": "e\n"})
    run(led.snapshot(2, "two"))
    run(led.restore(1))
    assert user_view() == before
    assert (wd / "train.py").read_text() == "lr = 6\n" and not (wd / "extra.py").exists()


def test_nested_repositories_are_recorded_and_restored(wd):
    lib = wd / "vendor/lib"
    write(lib, {"x.py": "x = 1\n", ".gitignore": "*.log\n", "out.log": "ignored\n"})
    ugit(lib, "init", "-q")
    ugit(lib, "add", "-A")
    ugit(lib, "commit", "-qm", "lib")
    write(wd / "fresh", {"f.py": "f\n"})
    ugit(wd / "fresh", "init", "-q")  # a repository with no commit yet: git add refuses it
    inner = lib / "sub"
    write(inner, {"y.py": "y = 1\n"})
    ugit(inner, "init", "-q")
    ugit(inner, "add", "-A")
    ugit(inner, "commit", "-qm", "inner")
    lib_view = (ugit(lib, "status", "--porcelain=v2", "--branch"), ugit(lib, "ls-files", "--stage"))

    led = Ledger(LocalTransport(), str(wd), "s1")
    run(led.snapshot(1, "one"))
    files = tree_of(wd, 1)
    assert {"vendor/lib/x.py", "vendor/lib/.gitignore", "vendor/lib/sub/y.py", "fresh/f.py"} <= set(files)
    assert "vendor/lib/out.log" not in files and not any("/.git/" in f for f in files)
    write(lib, {"x.py": "x = 2\n", "sub/y.py": "y = 2\n", "new.py": "n\n"})
    write(wd / "fresh", {"f.py": "g\n"})
    run(led.snapshot(2, "two"))
    assert run(led.changed_files()) == ["fresh/f.py", "vendor/lib/new.py", "vendor/lib/sub/y.py", "vendor/lib/x.py"]
    run(led.snapshot(3, "three"))  # the grafted entries from before do not confuse the next snapshot
    assert run(led.changed_files(2, 3)) == []
    run(led.restore(1))
    assert (lib / "x.py").read_text() == "x = 1\n" and (inner / "y.py").read_text() == "y = 1\n"
    assert not (lib / "new.py").exists() and (wd / "fresh/f.py").read_text() == "f\n"
    assert (ugit(lib, "status", "--porcelain=v2", "--branch"), ugit(lib, "ls-files", "--stage")) == lib_view
    run(led.snapshot(4, "four"))  # nor do the entries a restore loaded
    assert run(led.changed_files(1, 4)) == []


def test_two_sessions_in_one_workdir_keep_their_own_refs(wd):
    a, b = (Ledger(LocalTransport(), str(wd), s) for s in ("sa", "sb"))
    a1 = run(a.snapshot(1, "a one"))
    write(wd, {"train.py": "lr = 2\n"})
    b1 = run(b.snapshot(1, "b one"))
    write(wd, {"train.py": "lr = 3\n"})
    a2 = run(a.snapshot(2, "a two"))
    assert [r[1] for r in run(a.attempts())] == [a1, a2] and [r[1] for r in run(b.attempts())] == [b1]
    assert lgit(wd, "rev-parse", f"{a2}^").strip() == a1
    assert lgit(wd, "rev-list", "--count", b1).strip() == "1"  # b's first attempt has no parent
    assert sorted(lgit(wd, "for-each-ref", "--format=%(refname)").split()) == [
        "refs/harness/sa/1", "refs/harness/sa/2", "refs/harness/sb/1"]


def test_errors_say_what_to_do(wd, tmp_path, monkeypatch):
    t = LocalTransport()
    for bad in ("", "a/b", "a..b", "x.lock", "-x", "a b"):
        with pytest.raises(BadInput):
            Ledger(t, str(wd), bad)
    with pytest.raises(BadInput, match="absolute"):
        Ledger(t, "work", "s1")
    led = Ledger(t, str(wd), "s1")
    with pytest.raises(BadInput, match="no snapshots"):
        run(led.diff())
    with pytest.raises(BadInput):
        run(led.snapshot(-1, "x"))
    with pytest.raises(LedgerError, match="does not exist"):
        run(Ledger(t, str(tmp_path / "missing"), "s1").snapshot(1, "x"))
    run(led.snapshot(1, "one"))
    lock = wd / ".harness/ledger.git/index.lock"
    lock.write_text("")  # a crashed git left its lock behind
    with pytest.raises(LedgerError) as e:
        run(led.snapshot(2, "two"))
    head, *tail = str(e.value).splitlines()
    assert f"remove {lock}" in head and any("Unable to create" in ln for ln in tail)  # git's own words after
    lock.unlink()
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(LedgerError, match="git is not installed on local; install git on the host"):
        run(led.snapshot(2, "two"))


def test_snapshot_and_diff_over_ssh(ssh_lab, wd):
    from sshd import session

    spec = HostSpec(host="box", transport="asyncssh", ssh_config=str(ssh_lab.ssh_config),
                    known_hosts=str(ssh_lab.known_hosts))

    async def body(t):
        led = Ledger(t, str(wd), "remote")
        await led.snapshot(1, "one")
        (wd / "train.py").write_text("lr = 42\n")
        await led.snapshot(2, "two")
        files = [await led.file_at(n, "train.py") for n in (1, 2)] + [await led.file_at(2, "nope.py")]
        return await led.diff(), await led.changed_files(), await led.attempts(), files

    diff, changed, rows, files = session(spec, body)
    assert "+lr = 42" in diff and changed == ["train.py"] and [r[0] for r in rows] == [1, 2]
    assert files == ["lr = 1\n", "lr = 42\n", None]  # what `harness learn` reads of each snapshot
