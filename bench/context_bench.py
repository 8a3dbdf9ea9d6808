"""How big an agent's conversation gets over a long attempt, with and without masking older tool
outputs (harness/session/turn.py `masked`): 40 steps, each tool output at the tools' limit
(8,000 characters after trimming), a digest at its limit (4,000 tokens). Tokens are the budget
estimate (characters / 4 of the JSON), on the high side.

    .venv/bin/python bench/context_bench.py
"""

from __future__ import annotations

from harness.agent.model import estimate_tokens
from harness.session.turn import KEEP_OUTPUTS, SYSTEM, masked

STEPS, OUTPUT, DIGEST = 40, 8000, 4000 * 4


def conversation(steps: int) -> tuple[list[dict], list[int]]:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "d" * DIGEST}]
    results = []
    for n in range(steps):
        messages.append({"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": '{"command": "grep -rn x ."}'}}]})
        results.append(len(messages))
        body = "exit status 0\n" + "\n".join(f"./minichain/file{i}.py:{i}: some matching line of code" for i in range(400))
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": body[:OUTPUT]})
    return messages, results


def main() -> None:
    print(f"| steps | full conversation (tokens) | older outputs masked, last {KEEP_OUTPUTS} full | every older output masked |")
    print("|---:|---:|---:|---:|")
    for steps in (5, 10, 20, STEPS):
        messages, results = conversation(steps)
        print(f"| {steps} | {estimate_tokens(messages):,} | {estimate_tokens(masked(messages, results, KEEP_OUTPUTS)):,} "
              f"| {estimate_tokens(masked(messages, results, 0)):,} |")


if __name__ == "__main__":
    main()
