"""Secrets out of any text before it reaches a model, a report or a fixture."""

from __future__ import annotations

import re

# Known key and token shapes, by what they are (harness/scrub.py hides the same shapes).
KEY_SHAPES = {
    "key": r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}",
    "token": r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}|"
             r"xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b",
    "jwt": r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}",
    # a long mixed-case base64 run (a key body seen without its BEGIN line); hex ids and paths
    # (two or more slashes) stay
    "blob": r"(?<![\w+/])(?=[A-Za-z0-9+/]*[A-Z])(?=[A-Za-z0-9+/]*[a-z])(?=[A-Za-z0-9+/]*\d)"
            r"(?![A-Za-z0-9+]*/[A-Za-z0-9+]*/)[A-Za-z0-9+/]{40,}={0,2}",
}

_RULES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S),
     "<private-key>"),
    (re.compile(r"(?i)(authorization\s*[:=]\s*)(?:(bearer|basic|token)\s+)?[^\s'\",]+"),
     lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}<redacted>"),
    # key=value where the key's name ends in a secret word (HF_TOKEN, api_key, "password": …),
    # not TOKENIZERS_PARALLELISM or max_tokens.
    (re.compile(r"(?i)\b([\w.-]*(?:api[_-]?key|access[_-]?key|secret(?:[_-]?key)?|token|password|passwd|pwd))"
                r"(['\"]?\s*[:=]\s*['\"]?)(?!<redacted>)([^\s'\",;&]{4,})"), r"\1\2<redacted>"),
    *((re.compile(rx), f"<redacted-{what}>") for what, rx in KEY_SHAPES.items()),
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^\s/:@]+:[^\s/@]+@"), r"\1<redacted>@"),  # user:pass@ in URLs
]


def redact(text: str) -> str:
    for rx, repl in _RULES:
        text = rx.sub(repl, text)
    return text
