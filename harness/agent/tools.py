"""The agent's tools: bash and edit on the host (through a Transport), relaunch and give_up.

Every call passes the policy (policy.py) first; a refusal, a bad argument or an unknown tool
comes back to the model as text (`ToolResult`), never as an exception. Errors the operator
must fix (the host unreachable) are raised. Every output is redacted, then trimmed to
`max_output` characters keeping its head and tail.

    tools = Tools(transport, Policy("/w"), run_id="r7")
    result = await tools.call("bash", {"command": "grep -n margin config.yaml"})
"""

from __future__ import annotations

import difflib
import shlex
from dataclasses import dataclass

from ..redact import redact
from .policy import Policy, check_command, check_writes, kill_pids, resolve_write, write_targets


def _function(name: str, description: str, **params: tuple[str, str]) -> dict:
    required = [k for k, (_, d) in params.items() if not d.startswith("Optional")]
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {k: {"type": t, "description": d} for k, (t, d) in params.items()},
        "required": required, "additionalProperties": False}}}


TOOL_SPECS: list[dict] = [
    _function("bash", "Run a shell command on the training host, in the workdir, and see its exit status "
              "and output (long output keeps its head and tail). Use it to read and search files (cat, sed -n, "
              "grep -rn), inspect logs and processes. Do not wait for runs here: the harness follows the run "
              "after relaunch. Writes outside the workdir, `git push`, `sudo`, reboots and killing processes "
              "the run does not own are refused.",
              command=("string", "The command, run by /bin/sh -c in the workdir."),
              timeout=("number", "Optional: seconds before the command is killed (capped by the harness).")),
    _function("edit", "Replace one exact piece of text in a file under the workdir. `old` must match exactly "
              "once, whitespace included; otherwise nothing changes and you are shown where it matched or the "
              "most similar lines, to retry with. Create new files with bash.",
              path=("string", "The file, relative to the workdir (or absolute inside it)."),
              old=("string", "The exact text to replace (include surrounding lines to make it unique)."),
              new=("string", "The text to put in its place.")),
    _function("relaunch", "End your turn: the harness commits your changes and relaunches the run, then "
              "reports how far it got.", summary=("string", "What you changed and why, in a sentence or two.")),
    _function("give_up", "End the session: nothing you can change will fix this (say what a person must do).",
              reason=("string", "Why, and what a person should look at.")),
]
_SPECS = {s["function"]["name"]: s["function"]["parameters"] for s in TOOL_SPECS}
_TYPES = {"string": (str,), "number": (int, float)}


@dataclass(frozen=True)
class ToolResult:
    output: str            # what goes back to the model: redacted, long output trimmed (head + tail + a note of what was cut)
    refused: bool = False  # the policy refused the call (output says why)
    end: str | None = None  # "relaunch" or "give_up": the agent's turn is over
    summary: str = ""      # relaunch(summary) / give_up(reason) text


def trim(text: str, limit: int) -> str:
    """`text` cut to about `limit` chars: its head and tail (at line ends when near) and a note of the cut."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    head, tail = text[:half], text[-half:]
    if (k := head.rfind("\n")) >= half // 2:
        head = head[:k + 1]
    if 0 <= (k := tail.find("\n")) < half // 2:
        tail = tail[k + 1:]
    cut = text[len(head):len(text) - len(tail)]
    lines = cut.count("\n") + (not cut.endswith("\n"))
    return f"{head}[… {lines} lines / {len(cut.encode())} bytes cut …]\n{tail}"


def _problem(name: str, arguments) -> str | None:
    """What is wrong with the arguments of a call, for the model; None when they fit the schema."""
    schema = _SPECS[name]
    usage = f"{name}({', '.join(schema['properties'])})"
    if not isinstance(arguments, dict):
        return f"{name}: the arguments must be a JSON object: {usage}"
    for key in schema["required"]:
        if key not in arguments:
            return f"{name}: missing argument `{key}`: {usage}"
    for key, value in arguments.items():
        prop = schema["properties"].get(key)
        if value is None and key not in schema["required"]:
            continue
        if prop is None:
            return f"{name}: unknown argument `{key}`: {usage}"
        if not isinstance(value, _TYPES[prop["type"]]) or isinstance(value, bool):
            return f"{name}: `{key}` must be a {prop['type']}"
    return None


def _numbered(lines: list[str], start: int) -> str:
    """Lines with their 1-based numbers, from index `start`."""
    width = len(str(start + len(lines)))
    return "\n".join(f"{i:>{width}} | {line}" for i, line in enumerate(lines, start + 1))


def _nearest(text: str, old: str) -> tuple[int, int, float]:
    """(first, end, similarity) of the window of lines most like `old` (difflib). quick_ratio, an
    upper bound of ratio, ranks every window; only the best few pay for the exact ratio."""
    lines, k = text.splitlines(), max(1, len(old.splitlines()))
    sm = difflib.SequenceMatcher(None, autojunk=False)
    sm.set_seq2(old)

    def score(i: int, exact: bool) -> float:
        sm.set_seq1("\n".join(lines[i:i + k]))
        return sm.ratio() if exact else sm.quick_ratio()

    ranked = sorted(range(max(1, len(lines) - k + 1)), key=lambda i: -score(i, False))[:100]
    best = max(ranked, key=lambda i: (score(i, True), -i))
    return best, min(best + k, len(lines)), score(best, True)


class Tools:
    def __init__(self, transport, policy: Policy, *, run_id: str | None = None, timeout: float = 120.0,
                 max_output: int = 8000, once=None):
        """`once(cmd)` (once.Ops) guards the agent's commands: a command whose connection dropped is
        sent again and attaches to its first run, never running twice."""
        self.transport, self.policy, self.run_id = transport, policy, run_id
        self.once = once or (lambda cmd: cmd)
        self.timeout, self.max_output = timeout, max_output

    async def call(self, name: str, arguments: dict) -> ToolResult:
        """Run one tool call. Model mistakes come back as a ToolResult, never as an exception."""
        if name not in _SPECS:
            return ToolResult(f"unknown tool `{name}`; the tools are {', '.join(_SPECS)}")
        if problem := _problem(name, arguments):
            return ToolResult(problem)
        if name == "bash":
            return await self._bash(arguments["command"], arguments.get("timeout"))
        if name == "edit":
            return await self._edit(arguments["path"], arguments["old"], arguments["new"])
        text = arguments["summary" if name == "relaunch" else "reason"]
        return ToolResult(f"{name.replace('_', ' ')}: {redact(text)}", end=name, summary=redact(text))

    async def call_tool(self, call) -> ToolResult:
        """Run a model's ToolCall; arguments that were not valid JSON (call.error) go back as text."""
        if call.error:
            return ToolResult(f"{call.name}: {call.error}")
        return await self.call(call.name, call.arguments)

    def _out(self, text: str, **kw) -> ToolResult:
        return ToolResult(trim(redact(text), self.max_output), **kw)

    async def _bash(self, command: str, timeout: float | None) -> ToolResult:
        if not command.strip():
            return ToolResult("bash: the command is empty")
        if timeout is not None and timeout <= 0:
            return ToolResult("bash: `timeout` must be a positive number of seconds")
        why = check_command(self.policy, command) or \
            await check_writes(self.transport, self.policy, write_targets(self.policy, command)) or \
            await self._foreign(kill_pids(command))
        if why:
            return self._out(why, refused=True)
        limit = min(timeout or self.timeout, self.timeout)
        r = await self.transport.run(self.once(command), cwd=self.policy.workdir, timeout=limit)
        head = (f"timed out after {limit:g} s and was killed; the harness waits for runs, not bash. "
                "Output until then:") if r.timed_out else f"exit status {r.returncode}"
        parts = [head, r.stdout.rstrip("\n"), "[stderr]\n" + r.stderr.rstrip("\n") if r.stderr.strip() else ""]
        return self._out("\n".join(p for p in parts if p) + ("" if r.stdout or r.stderr.strip() else "\n(no output)"))

    async def _foreign(self, pids: list[int]) -> str | None:
        """Why killing `pids` is refused: each must carry HARNESS_RUN_ID=<run id> in its environment."""
        if not pids:
            return None
        if self.run_id is None:
            return f"refused: `kill {' '.join(map(str, pids))}` — no run of this session is alive, so nothing may be killed"
        marker = shlex.quote(f"HARNESS_RUN_ID={self.run_id}")
        script = (f"for p in {' '.join(map(str, pids))}; do "
                  f"grep -qzxF {marker} /proc/$p/environ 2>/dev/null || echo $p; done")
        r = await self.transport.run(script, timeout=30, check=True)
        if foreign := r.stdout.split():
            return (f"refused: `kill {' '.join(foreign)}` — not a process of this run (or gone); "
                    "only processes carrying the run's HARNESS_RUN_ID may be killed")
        return None

    async def _edit(self, path: str, old: str, new: str) -> ToolResult:
        if not old:
            return ToolResult("edit: `old` is empty; give the exact text to replace (create new files with bash)")
        if old == new:
            return ToolResult("edit: `old` and `new` are the same; nothing to change")
        why, real = await resolve_write(self.transport, self.policy, path)
        if why:
            return self._out(why, refused=True)
        try:
            text = (await self.transport.read(real)).decode("utf-8")
        except FileNotFoundError:
            return ToolResult(f"edit: {path} does not exist; create new files with bash (cat > {path} <<'EOF' … EOF)")
        except UnicodeDecodeError:
            return ToolResult(f"edit: {path} is not UTF-8 text; change it with bash")
        except OSError as e:
            return ToolResult(f"edit: cannot read {path}: {e.strerror or e}")
        count = text.count(old)
        if count == 0 and not text.strip():
            return ToolResult(f"edit: {path} is empty; write it with bash")
        if count == 0:
            first, end, score = _nearest(text, old)
            spaces = "".join(text.splitlines(True)[first:end]).split() == old.split()
            return self._out(
                f"edit: `old` was not found in {path}; the most similar lines ({first + 1}-{end}, "
                f"{score:.0%} alike{', differing only in whitespace' if spaces else ''}) are:\n"
                f"{_numbered(text.splitlines()[first:end], first)}\nCopy the exact text into `old` and retry.")
        if count > 1:
            at, starts = 0, []
            while (at := text.find(old, at)) >= 0:
                starts.append(str(text.count("\n", 0, at) + 1))
                at += len(old)
            return ToolResult(f"edit: `old` matches {count} times in {path} (at lines {', '.join(starts)}); "
                              "include more surrounding lines so it matches exactly once")
        at = text.find(old)
        changed = text.replace(old, new, 1)
        try:
            await self.transport.write(real, changed.encode("utf-8"))  # the file keeps its mode
        except OSError as e:
            return ToolResult(f"edit: cannot write {path}: {e.strerror or e}")
        line = text.count("\n", 0, at)
        shown = changed.splitlines()[max(0, line - 2):line + len(new.splitlines()) + 2][:30]
        return self._out(f"edited {path}: "
                         f"{len(old.splitlines()) or 1} line(s) at line {line + 1} replaced by "
                         f"{len(new.splitlines())} line(s):\n{_numbered(shown, max(0, line - 2))}")
