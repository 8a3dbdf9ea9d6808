"""What a shell command line does, read with shlex (best effort) for the policy (policy.py).

`commands(text, base)` returns every simple command of a line — the ones nested in `sh -c`,
`eval`, `$(…)`, backticks and here-documents fed to a shell included — with its redirections,
wrappers (`env X=1 nohup timeout 5 …`) peeled off and `cd` followed. `writes(argv)` names the
files a command writes as far as its arguments show. Quoted operators (`echo ';'`) are taken
for operators, and `$( )` inside single quotes for a substitution: both err towards refusing.
"""

from __future__ import annotations

import itertools
import posixpath
import re
import shlex
from dataclasses import dataclass


@dataclass
class Cmd:
    argv: list[str]
    redirects: list[tuple[str, str]]  # (operator, target)
    base: str | None  # the directory relative paths are in; None after `cd $X`
    pipe: int         # commands joined by | share it
    via: str | None   # "xargs" when xargs runs it (its arguments are unknown)

    @property
    def name(self) -> str:
        return posixpath.basename(self.argv[0]) if self.argv else ""


SEPARATORS = {";", "&", "&&", "||", "|", "|&", "(", ")", ";;", ";;&", "\n"}
REDIRECTS = {">", ">>", ">|", "&>", "&>>", "<>", ">&", "<", "<<", "<<-", "<<<", "<&"}
WRITE_OPS = {">", ">>", ">|", "&>", "&>>", "<>", ">&"}
SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "fish"}
HARMLESS = re.compile(r"/dev/(null|zero|full|stdout|stderr|stdin|tty|fd/\d+)\Z")  # writing these harms nothing
_OP = re.compile(r"&&|\|\||;;&?|\|&|&>>?|>>|>&|>\||<<<|<<-|<<|<&|<>|[;&|()<>\n]")
_PUNCT = "();<>|&\n"
_HEREDOC = re.compile(r"<<(-?)[ \t]*\\?(['\"]?)([A-Za-z_][^\s;&|()<>'\"]*)\2")
_SUBST = re.compile(r"\$\(((?:[^()]|\([^()]*\))*)\)|`([^`]*)`")
_ASSIGN = re.compile(r"[A-Za-z_]\w*=")
_RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}"}
_WRAPPERS = {"nohup": (), "exec": (), "command": (), "builtin": (), "setsid": (), "time": (),
             "nice": ("-n",), "ionice": ("-c", "-n", "-p", "-t"), "stdbuf": ("-i", "-o", "-e"),
             "env": ("-u", "-C", "-S", "--unset", "--chdir"), "timeout": ("-s", "-k", "--signal", "--kill-after"),
             "xargs": ("-I", "-n", "-P", "-d", "-L", "-E", "-a", "-s")}
# Options naming an output file or directory; _VALUE_OPTS: options that take a value.
_OUTPUTS = {"cp": ("-t", "--target-directory"), "mv": ("-t", "--target-directory"), "ln": ("-t", "--target-directory"),
            "install": ("-t", "--target-directory"), "curl": ("-o", "--output"), "wget": ("-O", "--output-document"),
            "sort": ("-o", "--output")}
_VALUE_OPTS = {"cp": ("-S",), "mv": ("-S",), "ln": ("-S",), "install": ("-m", "-o", "-g", "-S"), "mkdir": ("-m",),
               "touch": ("-d", "-t", "-r"), "truncate": ("-s", "-r"), "sort": ("-k", "-t", "-S", "-T")}


def _scan(text: str) -> tuple[str, list[str]]:
    """The line without comments, line continuations and here-document bodies; the bodies."""
    out, bodies, pending, quote, i = [], [], [], None, 0
    while i < len(text):
        c, m = text[i], None
        if quote == "'" or (quote == '"' and c != "\\"):
            quote = None if c == quote else quote
        elif c == "\\":  # an escaped char stays; a line continuation goes
            out.append(text[i:i + 2] if text[i + 1:i + 2] != "\n" else "")
            i += 2
            continue
        elif c in "'\"":
            quote = c
        elif c == "#" and next((s[-1] for s in reversed(out) if s), " ") in " \t\n;&|()<>":
            j = text.find("\n", i)  # a comment (only at the start of a word), up to the newline
            i = len(text) if j < 0 else j
            continue
        elif text.startswith("<<<", i) or (m := _HEREDOC.match(text, i)):
            if m:
                pending.append((m.group(3), m.group(1) == "-"))
            out.append(m.group(0) if m else "<<<")
            i += len(out[-1])
            continue
        elif c == "\n" and pending:  # the bodies follow this line, each up to its delimiter line
            out.append(c)
            i += 1
            for delim, tabs in pending:
                body = []
                while i < len(text):
                    end = text.find("\n", i) % (len(text) + 1)  # -1 (no newline): the end
                    line, i = text[i:end], end + 1
                    if (line.lstrip("\t") if tabs else line) == delim:
                        break
                    body.append(line)
                bodies.append("\n".join(body))
            pending = []
            continue
        out.append(c)
        i += 1
    return "".join(out), bodies


def _tokens(text: str) -> list[str]:
    lex = shlex.shlex(text, posix=True, punctuation_chars=_PUNCT)
    lex.whitespace, lex.whitespace_split, lex.commenters = " \t\r", True, ""
    return [t for tok in lex for t in (_OP.findall(tok) if tok and set(tok) <= set(_PUNCT) else [tok])]


def split_args(args: list[str], value_opts=()) -> tuple[list[str], list[str], dict[str, str]]:
    """(options, operands, values of the options that take one)."""
    flags, pos, vals = [], [], {}
    it = iter(args)
    for a in it:
        if a == "--":
            pos.extend(it)
        elif a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            flags.append(k)
            vals[k] = v
        elif a.startswith("-") and len(a) > 1:
            flags.append(a)
            if a in value_opts:
                vals[a] = next(it, "")
        else:
            pos.append(a)
    return flags, pos, vals


def short(flags: list[str], chars: str) -> bool:
    """Whether a short option cluster (-rf) holds one of `chars`."""
    return any(not f.startswith("--") and set(f[1:]) & set(chars) for f in flags)


def _unwrap(words: list[str]) -> tuple[list[str], str | None]:
    """The command a line of wrappers runs, and "xargs" when xargs runs it."""
    argv, via = list(words), None
    while argv:
        name = posixpath.basename(argv[0])
        if _ASSIGN.match(argv[0]) or argv[0] in _RESERVED:
            argv.pop(0)
        elif name in _WRAPPERS:
            argv.pop(0)
            via = "xargs" if name == "xargs" else via
            while argv and (argv[0].startswith("-") or (name == "env" and _ASSIGN.match(argv[0]))):
                if name == "command" and argv[0] in ("-v", "-V"):
                    return [], via  # a lookup, not a run
                if argv.pop(0) in _WRAPPERS[name] and argv:
                    argv.pop(0)
            if name == "timeout" and argv:
                argv.pop(0)  # the duration
        else:
            break
    return ([] if argv[:1] in (["for"], ["select"], ["case"]) else argv), via


def place(base: str | None, path: str) -> str | None:
    """Where `path` is: absolute or `~/…` (glob components become a name); None when a variable decides."""
    path = re.sub(r"^\$\{?HOME\}?(?=/|$)", "~", path)
    path = re.sub(r"[^/]*[*?[][^/]*", "__glob__", path)
    if path == "~" or path.startswith(("~/", "/")):
        return path
    if "$" in path or "`" in path or path.startswith("~") or base is None:
        return None
    return posixpath.join(base, path)


def commands(text: str, base: str | None, pipes=None, depth: int = 0) -> list[Cmd]:
    """Every simple command of `text`, nested ones included. ValueError when the quoting is broken."""
    pipes = pipes or itertools.count()
    clean, bodies = _scan(text)
    toks, cmds, words, redirs, pipe = _tokens(clean), [], [], [], next(pipes)
    for i, tok in enumerate(toks + [";"]):
        if redirs and redirs[-1][1] is None and tok not in SEPARATORS:
            redirs[-1] = (redirs[-1][0], tok)
        elif tok in SEPARATORS:
            argv, via = _unwrap(words)
            if argv or redirs:
                cmds.append(Cmd(argv, [(op, t or "") for op, t in redirs], base, pipe, via))
                if argv[:1] in (["cd"], ["pushd"]):
                    target = next((a for a in argv[1:] if not a.startswith("-")), "~")
                    base = None if target == "-" else place(base, target)
            words, redirs = [], []
            pipe = pipe if tok in ("|", "|&") else next(pipes)
        elif tok in REDIRECTS:
            redirs.append((tok, None))
        elif not (tok.isdigit() and toks[i + 1:i + 2] and toks[i + 1] in REDIRECTS):  # the 2 of 2>: a fd
            words.append(tok)
    if depth >= 4:
        return cmds
    nested, bodies = [], iter(bodies)
    for cmd in cmds:
        texts = [a or b for w in cmd.argv + [t for _, t in cmd.redirects] for a, b in _SUBST.findall(w)]
        docs = [next(bodies, "") if op != "<<<" else t for op, t in cmd.redirects if op.startswith("<<")]
        if cmd.name in SHELLS:
            flags, pos, _ = split_args(cmd.argv[1:])
            texts += pos[:1] if short(flags, "c") else docs
        elif cmd.name == "eval":
            texts.append(" ".join(cmd.argv[1:]))
        nested += [c for t in texts for c in commands(t, cmd.base, pipes, depth + 1)]
    return cmds + nested


def _inplace(args: list[str], script: str, perl: bool = False) -> list[str]:
    """The files `sed -i` / `perl -i` rewrite (what follows i in a cluster is the backup suffix)."""
    inplace, given, files, it = False, False, [], iter(args)
    for a in it:
        if a.startswith("--"):
            inplace = inplace or a.startswith("--in-place")
            given = given or a.startswith(("--expression", "--file"))
            if a in ("--expression", "--file"):
                next(it, None)
        elif a.startswith("-") and len(a) > 1:
            if perl and a[1] in "MmIdDx":  # -Mstrict: a module, not -i
                continue
            head, *suffix = a[1:].split("i", 1)
            inplace = inplace or bool(suffix)
            if head[-1:] and head[-1] in script:  # -e SCRIPT, -ne SCRIPT
                given = True
                next(it, None)
        else:
            files.append(a)
    return (files if given else files[1:]) if inplace else []


def writes(argv: list[str]) -> list[tuple[str, str, str]]:
    """(path, kind, label) of each file the command writes, as far as its arguments show. Kinds:
    write; tree (changes everything under it: chmod -R, find -delete); delete (rm -r)."""
    name, args = posixpath.basename(argv[0]), argv[1:]
    if name == "chmod" and args and re.fullmatch(r"-[rwxXst]+", args[0]):
        args = ["--", *args]  # `chmod -w f`: a mode, not an option
    outputs = _OUTPUTS.get(name, ())
    flags, pos, vals = split_args(args, outputs + _VALUE_OPTS.get(name, ()))
    outs = [vals[k] for k in outputs if k in vals]
    if name == "rm":
        rec = "--recursive" in flags or short(flags, "rR")
        return [(p, "delete" if rec else "write", "rm -r" if rec else "rm") for p in pos]
    if name in ("chmod", "chown", "chgrp"):
        rec = "--recursive" in flags or short(flags, "R")
        return [(p, "tree" if rec else "write", f"{name} -R" if rec else name)
                for p in (pos if "--reference" in vals else pos[1:])]
    if name in ("cp", "mv", "ln", "install", "rsync"):
        dest = outs or (pos if name == "install" and "-d" in flags else pos[-1:] if len(pos) > 1 else [])
        if name == "ln" and not dest and pos:
            dest = [posixpath.basename(pos[0].rstrip("/"))]  # the link is made in the cwd
        moved = (pos if outs else pos[:-1]) if name == "mv" else []
        return [(p, "write", name) for p in moved + dest]
    if name == "find" and ("-delete" in args or (
            any(a.startswith(("-exec", "-ok")) for a in args) and {"rm", "shred", "unlink"} & set(args))):
        roots = list(itertools.takewhile(lambda a: not a.startswith(("-", "!")), args))
        return [(p, "tree", "find") for p in roots or ["."]]
    files = {"rmdir": pos, "unlink": pos, "shred": pos, "tee": pos, "touch": pos, "truncate": pos, "mkdir": pos,
             "sed": _inplace(args, "ef"), "perl": _inplace(args, "eE", perl=True),
             "dd": [a[3:] for a in args if a.startswith("of=")], "curl": outs, "wget": outs, "sort": outs}
    return [(p, "write", {"sed": "sed -i", "perl": "perl -i", "dd": "dd of="}.get(name, name))
            for p in files.get(name, [])]
