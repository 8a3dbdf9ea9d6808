#!/usr/bin/env python3
"""Time `harness analyze --json` against `grep -E -c -f <playbook patterns>` on a generated log.

The log is shaped like a real 16-rank night (bench/nightgen.py, the default) or, with
`--shape uniform`, the older generator's (bench/loggen.py).

A figure printer, not a test: it generates a deterministic multi-rank RL training log, runs
each tool once (after warming the page cache) and prints Markdown tables to paste into the
README: throughput at one size, then the harness's peak RSS at several sizes (memory should
stay flat as the log grows). Stdlib only.

    python3 bench/analyze_bench.py                 # 1 GiB, memory table at 100..1000 MB
    python3 bench/analyze_bench.py --quick         # 100 MB, memory table at 50, 100 MB
    python3 bench/analyze_bench.py --gen-only --out /tmp/logs --size-mb 200
    python3 bench/analyze_bench.py --everything    # and follow latency, catch-up, demo overhead
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ere import Unconvertible, py_to_ere  # noqa: E402
from loggen import write_log  # noqa: E402
from nightgen import write_night  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / ".venv" / "bin" / "harness"
FALLBACK = Path(__file__).with_name("fallback-patterns.txt")
TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None
MB = 1 << 20
PATTERNS_CODE = ("import json; from harness.playbook import load_playbook; "
                 "print(json.dumps(list(load_playbook(None).patterns())))")


def load_patterns() -> tuple[list[str], str]:
    """The playbook's regexes, or the marked fallback list while harness.playbook is missing."""
    py = ROOT / ".venv" / "bin" / "python"
    if py.exists():
        r = subprocess.run([str(py), "-c", PATTERNS_CODE], capture_output=True, text=True)
        if r.returncode == 0:
            return json.loads(r.stdout), "load_playbook(None).patterns()"
        why = (r.stderr.strip().splitlines() or ["?"])[-1]
    else:
        why = ".venv missing (run scripts/install.sh)"
    lines = FALLBACK.read_text().splitlines()
    return [ln for ln in lines if ln and not ln.startswith("#")], f"FALLBACK list ({why})"


def write_ere(patterns: list[str], path: Path) -> tuple[list[tuple[str, str]], dict]:
    """Write the convertible patterns to path; return (pairs (python, ere), drop/flag notes)."""
    pairs, notes = [], {"dropped": [], "flags_dropped": 0, "invalid": []}
    for p in dict.fromkeys(patterns):
        try:
            ere, flags = py_to_ere(p)
        except (Unconvertible, ValueError, IndexError) as e:
            notes["dropped"].append(f"{p!r}: {e}"); continue
        r = subprocess.run(["grep", "-E", "-e", ere], input=b"", capture_output=True)
        if r.returncode == 2 or r.stderr:
            notes["invalid"].append(f"{ere!r}: {r.stderr.decode().strip()}"); continue
        notes["flags_dropped"] += bool(flags)
        pairs.append((p, ere))
    path.write_text("".join(ere + "\n" for _, ere in pairs))
    return pairs, notes


def check_conversion(pairs, sample: Path) -> list[str]:
    """Per pattern: lines matched by Python re (ASCII) vs grep -E in the C locale, on a sample."""
    lines = sample.read_bytes().decode("utf-8", "replace").split("\n")[:-1]
    diffs = []
    for p, ere in pairs:
        rx = re.compile(p, re.ASCII)
        want = sum(1 for ln in lines if rx.search(ln))
        r = subprocess.run(["grep", "-E", "-c", "-e", ere, str(sample)], capture_output=True,
                           text=True, env={**os.environ, "LC_ALL": "C"})
        if int(r.stdout or 0) != want:
            diffs.append(f"{p!r} -> {ere!r}: python {want}, grep {r.stdout.strip()}")
    return diffs


# --- running and measuring -------------------------------------------------------------------

def measure(cmd: list[str], env=None) -> dict:
    """Run cmd once: wall seconds, peak RSS (MB) of that child alone, exit code, stdout."""
    with tempfile.TemporaryDirectory() as d:
        out, tf = Path(d, "out"), Path(d, "time")
        full = [TIME, "-f", "%e %M", "-o", str(tf), *cmd] if TIME else cmd
        with out.open("wb") as fo:
            t0 = time.perf_counter()
            proc = subprocess.Popen(full, stdout=fo, stderr=subprocess.DEVNULL, env=env)
            _, status, ru = os.wait4(proc.pid, 0)
            wall, rss_kb = time.perf_counter() - t0, ru.ru_maxrss
        proc.returncode = rc = os.waitstatus_to_exitcode(status)
        if TIME:
            sec, kb = tf.read_text().split()[-2:]
            wall, rss_kb = float(sec), int(kb)
        return {"s": wall, "rss": rss_kb / 1024, "rc": rc, "out": out.read_text(errors="replace")}


def harness_available() -> bool:
    if not HARNESS.exists():
        return False
    return subprocess.run([str(HARNESS), "analyze", "--help"], capture_output=True).returncode == 0


def default_locale() -> str:
    import locale
    return locale.setlocale(locale.LC_CTYPE, "")


RATES: dict[str, float] = {}  # tool -> MB/s of its first row, for the ratios


def row(size_mb: float, tool: str, m: dict, ok=(0,)) -> str:
    note = f" (exit {m['rc']})" if m["rc"] not in ok else ""
    mbs = size_mb / m["s"] if m["s"] > 0 else float("inf")
    RATES.setdefault(tool.split(" (")[0], mbs)
    return f"| {size_mb:,.0f} | {tool}{note} | {m['s']:.2f} | {mbs:,.0f} | {m['rss']:,.0f} |"


HEAD = "| size MB | tool | seconds | MB/s | peak RSS MB |\n|---:|---|---:|---:|---:|"


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor() or "?")
    grep_v = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return (f"CPU: {cpu} ({os.cpu_count()} cores) · {grep_v} · Python {platform.python_version()}"
            f" · timing: {TIME + ' -f %e %M' if TIME else 'os.wait4'} · MB = 2^20 bytes")


# --- main ------------------------------------------------------------------------------------

LOCALE_SAMPLE_MB = 50
SHAPE = {"shape": "night", "ranks": 16, "error_every": 1000}  # set from the command line


def make_log(work: Path, size_mb: int, seed: int) -> Path:
    path = work / f"rl-{SHAPE['shape']}-{size_mb}mb.log"
    if not path.exists():
        t0 = time.perf_counter()
        if SHAPE["shape"] == "night":
            write_night(path, size_mb * MB, seed, ranks=SHAPE["ranks"], error_every=SHAPE["error_every"])
        else:
            write_log(path, size_mb * MB, seed)
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)  # warm page cache
    return path


def grep_rows(log: Path, ere: Path, size_mb: int) -> list[str]:
    cmd = ["grep", "-E", "-c", "-f", str(ere), str(log)]
    m = measure(cmd, env={**os.environ, "LC_ALL": "C"})
    rows = [row(size_mb, f"grep -E -c -f, LC_ALL=C ({m['out'].strip()} lines)", m, (0, 1))]
    loc = default_locale()
    if loc not in ("C", "POSIX"):
        # grep's matcher crawls on \w and \s in a UTF-8 locale (< 1 MB/s on a night's log): timed
        # on the log's first LOCALE_SAMPLE_MB, its rate is the figure
        part = min(size_mb, LOCALE_SAMPLE_MB)
        sample = log.with_name(f"{log.stem}-head{part}.log")
        with log.open("rb") as f, sample.open("wb") as out:
            data = f.read(part * MB)
            out.write(data[: data.rfind(b"\n") + 1])
        env = {k: v for k, v in os.environ.items() if k != "LC_ALL"}
        m = measure(["grep", "-E", "-c", "-f", str(ere), str(sample)], env=env)
        sample.unlink()
        what = f"first {part} MB" if part < size_mb else f"{m['out'].strip()} lines"
        rows.append(row(part, f"grep -E -c -f, {loc} ({what})", m, (0, 1)))
    return rows


def harness_row(log: Path, size_mb: int) -> tuple[str, str]:
    """The table row, and a one-line verdict so a figure from a broken run is not mistaken."""
    m = measure([str(HARNESS), "analyze", str(log), "--json"])
    try:
        v = json.loads(m["out"])
        cause = (v.get("root_cause") or {}).get("text", "")
        verdict = (f"outcome={v.get('outcome')}, last_stage_passed={v.get('last_stage_passed')}, "
                   f"failed_stage={v.get('failed_stage')}, root cause: {cause[:100]!r}")
    except (ValueError, AttributeError):
        verdict = f"no JSON on stdout: {m['out'][:100]!r}"
    return row(size_mb, "harness analyze --json", m), f"{size_mb:,} MB: {verdict}"


def run(a, work: Path) -> None:
    log = make_log(work, a.size_mb, a.seed)
    if a.gen_only:
        return print(log)
    res = {"mem_rows": [], "verdicts": []}
    patterns, res["source"] = load_patterns()
    res["unique"] = len(set(patterns))
    ere = work / "patterns.ere"
    res["pairs"], res["notes"] = write_ere(patterns, ere)
    sample = work / "sample.log"
    with log.open("rb") as f:
        sample.write_bytes(b"".join(f.readline() for _ in range(20000)))
    res["diffs"] = check_conversion(res["pairs"], sample)
    res["rows"] = grep_rows(log, ere, a.size_mb)
    if not harness_available():
        res["rows"].append(f"| {a.size_mb:,} | harness: not available | – | – | – |")
        return report(res)
    for size, path in [(a.size_mb, log)] + [(s, None) for s in a.sizes]:
        r, verdict = harness_row(path or make_log(work, size, a.seed), size)
        res["rows" if path else "mem_rows"].append(r)
        res["verdicts"].append(verdict)
        if not path and size != a.size_mb and not a.out:
            (work / f"rl-{SHAPE['shape']}-{size}mb.log").unlink()
    report(res)


def report(res: dict) -> None:
    notes = res["notes"]
    print(f"Patterns: {res['unique']} unique from {res['source']}; {len(res['pairs'])} converted to "
          f"GNU ERE, {len(notes['dropped'])} dropped (lookaround/backreference/...), "
          f"{len(notes['invalid'])} rejected by grep, {notes['flags_dropped']} with inline flags dropped.")
    for d in notes["dropped"] + notes["invalid"]:
        print(f"  dropped: {d}")
    diffs = res["diffs"]
    print("Conversion check (20,000-line sample, python re vs grep, per pattern): "
          + (f"{len(diffs)} differ" if diffs else "all agree"))
    for d in diffs[:10]:
        print(f"  differs: {d}")
    print(f"\n{HEAD}\n" + "\n".join(res["rows"]))
    if res["mem_rows"]:
        print(f"\nMemory as the log grows (harness analyze --json):\n\n{HEAD}\n" + "\n".join(res["mem_rows"]))
    for v in res["verdicts"]:
        print(f"harness verdict at {v}")
    mine = RATES.get("harness analyze --json")
    for tool, rate in RATES.items():
        if mine and tool.startswith("grep"):
            print(f"ratio harness / {tool}: {mine / rate:.2f}")
    print(f"\n{machine()}")


def extras() -> None:
    """Follow latency and catch-up on both SSH transports (a loopback sshd of tests/sshd.py) and
    the demo's overhead share, so that one run prints every figure of the README's Benchmark."""
    sys.path.insert(0, str(ROOT / "tests"))
    from sshd import SshLab  # noqa: E402

    with tempfile.TemporaryDirectory(prefix="harness-bench-") as d:
        (Path(d) / "ssh").mkdir()
        lab = SshLab(Path(d) / "ssh").start()
        try:
            for tr in ("asyncssh", "paramiko"):
                r = subprocess.run([str(HARNESS), "bench", "remote", "--host", "box", "--ssh-config",
                                    str(lab.ssh_config), "--known-hosts", str(lab.known_hosts), "--transport", tr,
                                    "--json"], capture_output=True, text=True)
                if r.returncode:
                    print(f"bench remote over {tr} failed: {r.stderr.strip()[-300:]}")
                    continue
                out = json.loads(r.stdout)
                fl, cu = out["follow_latency_ms"], out["catch_up"]
                print(f"follow latency over {tr}: p50 {fl['p50']:.1f} ms, p95 {fl['p95']:.1f} ms; "
                      f"catch-up {cu['mb_per_s']:.0f} MB/s ({cu['mb']} MiB)")
        finally:
            lab.stop()
        r = subprocess.run([str(HARNESS), "demo"], capture_output=True, text=True, cwd=d,
                           env={**os.environ, "HARNESS_HOME": str(Path(d) / "home")})
        said = [ln for ln in r.stdout.splitlines() if "overhead" in ln]
        print(f"demo: {said[0].strip() if said else 'no overhead line (exit ' + str(r.returncode) + ')'}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="log size for the throughput table")
    ap.add_argument("--sizes", default="100,250,500,1000", help="sizes (MB) for the memory table; '' to skip")
    ap.add_argument("--quick", action="store_true", help="--size-mb 100 --sizes 50,100")
    ap.add_argument("--seed", type=int, default=20250604)
    ap.add_argument("--out", type=Path, help="keep generated logs here instead of a temp dir")
    ap.add_argument("--gen-only", action="store_true", help="only generate the log; print its path")
    ap.add_argument("--shape", choices=["night", "uniform"], default="night",
                    help="night: bench/nightgen.py, a 16-rank night (default); uniform: bench/loggen.py")
    ap.add_argument("--ranks", type=int, default=16, help="ranks of a night log")
    ap.add_argument("--error-every", type=int, default=1000, help="one survived error in this many lines")
    ap.add_argument("--everything", action="store_true",
                    help="also follow latency and catch-up on both transports (loopback sshd) and the demo's overhead")
    a = ap.parse_args(argv)
    SHAPE.update(shape=a.shape, ranks=a.ranks, error_every=a.error_every)
    if a.quick:
        a.size_mb, a.sizes = 100, "50,100"
    a.sizes = [int(s) for s in a.sizes.split(",") if s]
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        run(a, a.out)
    else:
        with tempfile.TemporaryDirectory(prefix="harness-bench-") as d:
            run(a, Path(d))
    if a.everything and not a.gen_only:
        extras()


if __name__ == "__main__":
    main()
