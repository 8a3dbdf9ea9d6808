"""Scrubbing: a recorded session's texts with secrets, host names, IP addresses and user names
replaced by stable placeholders, so the session can leave its private directory as a fixture
(`harness export --scrub`).

Redaction (harness/redact.py) turns a secret into `<redacted>` for a reader. A scrub must keep
the fixture replayable instead: the controller re-runs on the scrubbed data, so

- the same value always gets the same placeholder, in every text (a key found as `api_key=…`
  in a log is also replaced where it appears bare, e.g. in a model message): pass 1 (`collect`)
  runs over every text before pass 2 (`scrub`) replaces every known value everywhere;
- a placeholder is as long as its value in UTF-8 bytes (read offsets, file sizes and truncation
  points still add up) and shell-safe (letters, digits, `.`; `shlex.quote` leaves it alone):
  kind prefix + index padded with `x` — `SECRET1xxxxxxx`, `host1xxxx`, `user1`, `word1x` — or the
  short form (`S1xx`, `h1`, `u1`, `w1`) when the long one does not fit. A value shorter than the
  short form (a one-letter word, or past index 9 a two-letter one) gets it anyway and the text
  changes length: the price of not leaving it in;
- an IP address becomes an address of the same length in 0.0.0.0/8 or 240.0.0.0/4, ranges no
  real host uses, so a placeholder is never taken for an address to hide;
- placeholders never count as values to hide, so scrubbing a scrubbed text changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import Counter

from .redact import KEY_SHAPES

KINDS = ("secret", "host", "word", "ip", "user")
_PREFIX = {"secret": ("SECRET", "S"), "host": ("host", "h"), "word": ("word", "w"), "user": ("user", "u")}
_PLACEHOLDER = re.compile(r"(?:SECRET|S|host|h|word|w|user|u)\d+x*")
_FOLDED = {"host", "word", "user"}  # names: matched whole-word, case-insensitively

# -- what a secret's name looks like: a segment of it (split at _ - . and camelCase) is one of these
_SECRET_WORDS = {"secret", "token", "password", "passwd", "pwd", "passphrase", "credential", "credentials",
                 "auth", "apikey", "accesskey", "privatekey"}
_KEY_KINDS = {"api", "access", "private", "secret", "signing", "encryption", "session"}  # <kind>_key
_TOKEN_KINDS = {"pad", "eos", "bos", "unk", "sep", "cls", "mask", "special", "max", "min", "num"}  # pad_token…
_NOT_A_VALUE = {"env", "file", "path", "dir", "name", "type", "id", "ids", "len", "length", "size", "count",
                "limit", "url", "uri", "mode", "method", "enabled"}  # api_key_env names a variable: no secret
_SEGMENT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

# Too common to identify anyone, and replacing them would wreck ordinary text and paths.
# ma-user, HwHiAiUser: ModelArts' and the Ascend driver's stock users; export, work…: shared dirs in /home.
GENERIC_USERS = {"root", "user", "users", "admin", "administrator", "ubuntu", "debian", "centos", "fedora",
                 "ec2-user", "guest", "nobody", "daemon", "www-data", "runner", "ci", "git", "jenkins", "docker",
                 "me", "test", "tester", "ma-user", "hwhiaiuser", "linuxbrew", "home", "shared", "share", "public",
                 "export", "local", "data", "work", "workspace", "project", "projects", "models", "code", "dev",
                 "app", "apps", "opt", "src", "tmp", "mnt", "nfs", "storage", "scratch", "cache", "default"}
_TRIVIAL = {"true", "false", "none", "null", "nil", "yes", "no", "on", "off", "undefined", "redacted", "required",
            "optional", "string", "empty", "unset", "default", "dummy", "await", "self"}  # `api_key = await f()`
_NUMBER = re.compile(r"[-+]?[\d.]+(?:e[-+]?\d+)?", re.I)
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")  # config.token: code, not a value
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9._-]*")

_STOP = r"""\s'"`,;&|(){}\[\]<>"""
# a bare value ends at a stop char that does not open a call or an index (`token = tok.encode(x)` is code)
_VALUE = rf"""(?:"([^"\n]*)"|'([^'\n]*)'|([^{_STOP}]+)(?![^{_STOP}]|[(\[{{]))"""
_ASSIGN = re.compile(r"(?<![\w.])-{0,2}([A-Za-z_][\w.-]*)[\"']?[ \t]*[:=][ \t]*" + _VALUE)
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)[ \t]+" + _VALUE)
_LOGIN = re.compile(r"(?<!\w)(?:USER|LOGNAME|USERNAME)[\"']?[ \t]*[:=][ \t]*[\"']?([A-Za-z_][A-Za-z0-9._-]*)")
_HOME = re.compile(r"/(?:home|Users)/([A-Za-z_][A-Za-z0-9._-]*)")
_AUTH = re.compile(r"(?i)\bauthorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?([^\s'\",;]+)")
_BEARER = re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{8,})")
_URL_LOGIN = re.compile(r"\b[a-z][a-z0-9+.-]*://([^\s/:@]+):([^\s/@]+)@")
_KEY_BODY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----((?:(?:\s|\\[nr])+[A-Za-z0-9+/=]+)+)")
_KEY_SPLIT = re.compile(r"(?:\s|\\[nr])+")
_SHAPES = re.compile("|".join(KEY_SHAPES.values()))  # known token shapes, and a long base64 run
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IP = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?!\w|\.\d)")
_BOUNDS = {"secret": (r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"), "ip": (r"(?<![\w.])", r"(?!\w|\.\d)"),
           "name": (r"(?<![A-Za-z0-9_])", r"(?![A-Za-z0-9_])")}


def is_secret_name(name: str) -> bool:
    """WANDB_API_KEY, hf_token, "password", apiKey: yes; max_tokens, TOKENIZERS_PARALLELISM, pad_token,
    api_key_env: no."""
    parts = [p.lower() for p in _SEGMENT.findall(name)]
    if not parts or parts[-1] in _NOT_A_VALUE:
        return False
    return any((p in _SECRET_WORDS and not (p == "token" and i and parts[i - 1] in _TOKEN_KINDS))
               or (p == "key" and i and parts[i - 1] in _KEY_KINDS) for i, p in enumerate(parts))


def placeholder(kind: str, index: int, length: int) -> str:
    """The index-th placeholder of `kind` for a value of `length` bytes."""
    if kind == "ip":
        return _ip(length, index)
    for prefix in _PREFIX[kind]:
        core = f"{prefix}{index}"
        if len(core) <= length:
            return core.ljust(length, "x")
    return core


def _ip(length: int, index: int) -> str:
    """An address of `length` chars (7–15) in 0/8 (up to 8 chars) or 240/4, the index-th of its length;
    indices past the ~1000 such addresses of the shortest lengths repeat."""
    first = 0 if length < 9 else 240
    digits = length - len(str(first)) - 3
    widths = [digits // 3 + (j < digits % 3) for j in range(3)]  # 1–3 digits per octet
    octets, n = [], index
    for w in reversed(widths):
        lo, count = (0, 10) if w == 1 else (10, 90) if w == 2 else (100, 156)
        n, r = divmod(n, count)
        octets.insert(0, lo + r)
    if first:
        first += n % 15  # more room in 240–254
    return ".".join(map(str, [first, *octets]))


def _hideable(kind: str, value: str) -> bool:
    if not value or _PLACEHOLDER.fullmatch(value) or set(value) == {"x"}:
        return False
    low = value.lower()
    if kind == "secret":
        return not (low in _TRIVIAL or _NUMBER.fullmatch(value)
                    or value.startswith(("$", "<", "%", "/", "~", "-", "*")) or "***" in value)
    if kind in ("user", "host"):  # a host called ubuntu identifies no more than a user called so
        return len(value) >= 2 and low not in GENERIC_USERS and (
            bool(_USER.fullmatch(value)) if kind == "user" else not low.startswith(("localhost", "127.", "::1")))
    if kind == "ip":  # not loopback, 0.0.0.0, broadcast, nor a placeholder (0/8, 240/4)
        return bool(_IP.fullmatch(value)) and int(value.split(".")[0]) not in (0, 127, *range(240, 256))
    return True  # a word the person asked for


def decode_data(value: str) -> bytes | None:
    """The bytes of a base64 `data` field, or None when it is not canonical base64 (then it is text)."""
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode() == value else None


def to_text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")  # any bytes round-trip, one char per bad byte


def to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class Scrubber:
    """Pass 1: `collect(text)` / `collect_value(obj)` over every text; pass 2: `scrub(text)` /
    `scrub_value(obj)`. `secrets`, `hosts` (names or IPs), `users`, `words` are known up front (the
    spec's, this machine's, the person's --scrub-word)."""

    def __init__(self, *, secrets=(), hosts=(), users=(), words=()):
        self._kind: dict[str, str] = {}  # value (lowered for names) -> kind
        self._given: dict[str, str] = {}  # placeholder given at first use: numbers stay dense
        self._next = Counter()
        self._cache: dict[tuple, re.Pattern] = {}
        for kind, values in (("secret", secrets), ("host", hosts), ("user", users), ("word", words)):
            for v in values:
                self.add(kind, v)

    def add(self, kind: str, value: str, min_len: int = 1) -> bool:
        """Know `value` as a `kind` to hide; False when it is not worth hiding (or already known)."""
        value = value.strip() if isinstance(value, str) else ""
        if kind == "host" and _IP.fullmatch(value):
            kind = "ip"  # a host given by its address is hidden as one
        key = value.lower() if kind in _FOLDED else value
        if len(value) < min_len or key in self._kind or not _hideable(kind, value):
            return False
        self._kind[key] = kind
        return True

    def collect(self, text: str) -> None:
        """Pass 1: find the values to hide in `text`."""
        secret = lambda v, n=4: self.add("secret", v, n)  # noqa: E731
        for m in _KEY_BODY.finditer(text):
            for piece in _KEY_SPLIT.split(m.group(1)):
                secret(piece)
        for rx in (_AUTH, _BEARER):
            for m in rx.finditer(text):
                secret(m.group(1))
        for m in _SHAPES.finditer(text):
            secret(m.group(0))
        for rx in (_ASSIGN, _FLAG):
            for m in rx.finditer(text):
                value = next(g for g in m.groups()[1:] if g is not None)
                if is_secret_name(m.group(1)) and not _DOTTED_NAME.fullmatch(value):
                    secret(value)
        for m in _URL_LOGIN.finditer(text):
            self.add("user", m.group(1))
            secret(m.group(2), 1)
        for rx in (_LOGIN, _HOME):
            for m in rx.finditer(text):
                self.add("user", m.group(1))
        for m in _IP.finditer(text):
            self.add("ip", m.group(0))

    def collect_value(self, obj, key: str | None = None) -> None:
        """Pass 1 over a JSON value: every string; a `data` string as the bytes it encodes; the value
        of a secret-named key whole (an env dict's {"HF_TOKEN": …} has no `=` to find)."""
        if isinstance(obj, dict):
            for k, v in obj.items():
                self.collect_value(v, k if isinstance(k, str) else None)
        elif isinstance(obj, list):
            for v in obj:
                self.collect_value(v)
        elif isinstance(obj, str):
            raw = decode_data(obj) if key == "data" else None
            if key and is_secret_name(key):
                self.add("secret", obj, 4)
            elif key in ("USER", "LOGNAME", "USERNAME"):
                self.add("user", obj)
            elif key and key.lower() == "authorization":
                self.collect(f"Authorization: {obj}")
            self.collect(obj if raw is None else to_text(raw))

    def scrub(self, text: str) -> str:
        """Pass 2: every known value in `text` replaced by its placeholder, longest values first."""
        if not self._kind or not text:
            return text
        low = text.lower()
        present = tuple(v for v in self._kind if v in (low if self._kind[v] in _FOLDED else text))
        if not present:
            return text
        return self._regex(present).sub(self._replace, text)

    def scrub_value(self, obj, key: str | None = None):
        """Pass 2 over a JSON value: a copy with every string scrubbed (a `data` string as its bytes);
        keys, numbers and booleans as they were."""
        if isinstance(obj, dict):
            return {k: self.scrub_value(v, k if isinstance(k, str) else None) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.scrub_value(v) for v in obj]
        if isinstance(obj, str):
            raw = decode_data(obj) if key == "data" else None
            if raw is None:
                return self.scrub(obj)
            return base64.b64encode(to_bytes(self.scrub(to_text(raw)))).decode()
        return obj

    @property
    def placeholders(self) -> dict[str, int]:
        """How many values of each kind were replaced somewhere."""
        return {kind: self._next[kind] for kind in KINDS}

    @property
    def mapping(self) -> dict[str, str]:
        """value -> placeholder, for the values replaced so far (names lowered)."""
        return dict(self._given)

    def _regex(self, present: tuple) -> re.Pattern:
        if present not in self._cache:
            if len(self._cache) > 256:
                self._cache.clear()
            alts = [self._pattern(v) for v in sorted(present, key=len, reverse=True)]
            self._cache[present] = re.compile("|".join(alts))
        return self._cache[present]

    def _pattern(self, value: str) -> str:
        kind, v = self._kind[value], re.escape(value)
        if kind == "secret" and len(value) >= 8:
            return v  # long enough to hide wherever it is, even glued to other text
        before, after = _BOUNDS["name" if kind in _FOLDED else kind]
        return f"{before}(?i:{v}){after}" if kind in _FOLDED else f"{before}{v}{after}"

    def _replace(self, m: re.Match) -> str:
        found = m.group(0)
        key = found if found in self._kind else found.lower()
        if key not in self._given:
            kind = self._kind[key]
            self._next[kind] += 1
            self._given[key] = placeholder(kind, self._next[kind], len(to_bytes(found)))
        return self._given[key]
