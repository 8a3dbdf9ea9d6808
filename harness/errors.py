"""The exception tree. Every error the operator must act on is a `HarnessError` whose
message is one line saying what is wrong and what to do; the CLI prints it and exits 2.

    HarnessError
    ├── BadInput          a log path, option or value the user gave is unusable
    ├── PlaybookError     a playbook file is invalid (names the file, the line and the field)
    │   └── SpecError     a run spec (harness.yaml) is invalid (the same)
    ├── TransportError    the host cannot be reached or used (connection, auth, SFTP)
    │   ├── HostKeyError  an unknown host key (with its fingerprint and `harness trust HOST`)
    │   │                 or a changed one (always refused)
    │   ├── ConnectionLost   the connection could not be made or dropped (refused, timed out,
    │   │                 reset, an sshd restart): weather — the session's reconnecting layer
    │   │                 (harness.remote.reconnect) retries it
    │   └── HostUnreachable  still no connection after the grace (`connection.grace`): the
    │                     session ends as `unreachable`
    ├── CommandFailed     a command run with check=True failed (command, status, last lines)
    │   └── CommandTimeout   it ran out of time; the partial output is kept
    ├── RunActive         a run is still alive in the workdir (harness.remote.launch)
    ├── LaunchFailed      a launched run never started (harness.remote.launch)
    ├── ModelError        the model endpoint refused the request (bad key, unknown model) or
    │                     kept failing after its retries (harness.agent.model)
    ├── JournalError      a session's journal (or recording) is corrupt before its last line, or
    │                     cannot be written
    └── LedgerError       a git command of the shadow ledger failed on the host, or git is missing
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base of every error the harness reports to its user."""


class BadInput(HarnessError):
    """A path, option or value given by the user cannot be used."""


class PlaybookError(HarnessError):
    """A playbook is invalid; the message names the file, the line and the field."""

    def __init__(self, file: str, line: int | None, field: str, message: str):
        self.file, self.line, self.field, self.message = file, line, field, message
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


class TransportError(HarnessError):
    """The host cannot be reached or used: connection refused or lost, auth failed, SFTP error."""


class HostKeyError(TransportError):
    """The host's key is unknown (trust it with `harness trust HOST`) or has changed (refused)."""


class ConnectionLost(TransportError):
    """The connection could not be made or was lost: refused, timed out, reset, closed by an sshd
    restart. Weather, not a verdict on the host: retried through a reconnect."""


class HostUnreachable(TransportError):
    """The host stayed unreachable past the session's grace; the session ends as `unreachable`."""


class CommandFailed(HarnessError):
    """A command run with `check=True` failed. `result` is its CommandResult."""

    def __init__(self, result):
        self.result = result
        status = "timed out" if result.timed_out else f"exit status {result.returncode}"
        tail = result.tail(10)
        super().__init__(f"command failed ({status}): {result.command}" + (f"\n{tail}" if tail else ""))


class CommandTimeout(CommandFailed):
    """The command ran past its timeout and was killed; `result` holds the output until then."""


class SpecError(PlaybookError):
    """A run spec (harness.yaml) is invalid; the message names the file, the line and the field."""


class ModelError(HarnessError):
    """The model endpoint cannot be used: it refused the request (400/401/403/404) or still
    failed after every retry. The message names the endpoint, never the API key."""


class ToolsRefused(ModelError):
    """The endpoint cannot take tools at all (vLLM without a tool parser, Ollama for a model
    without tool support): the agent talks to it in the text protocol instead."""


class ContextOverflow(ModelError):
    """The conversation no longer fits the model's context (`maximum context length`)."""


class JournalError(HarnessError):
    """A session's journal.jsonl (or recording.jsonl) has a corrupt line before its end, or the
    journal cannot be written."""


class LedgerError(HarnessError):
    """A git command of the shadow ledger failed on the host, or git is not installed there."""


def one_line(e: BaseException) -> str:
    """An exception as one line for a journal or a terminal: ours by their message (they are
    written for the operator), anything else with its type (a bug, or a library's error)."""
    text = " ".join(str(e).split())
    return (text if isinstance(e, HarnessError) else f"{type(e).__name__}: {text}")[:500]
