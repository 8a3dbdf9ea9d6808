"""Open what a session needs (the host, the model) from its spec, run it, close everything.

Start-up checks come first and fail before anything is journaled: the model's key variable, the
connection (a refused or unknown host key, a dead host). `on_ready()` is called once they passed
(the background controller tells the `continue` that started it); a failure raises a one-line
HarnessError."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from ..errors import BadInput, HarnessError, TransportError
from ..record import FORMAT, Recorder, RecordingModel, RecordingTime, RecordingTransport, recording_opener
from ..remote.transport import connect
from .controller import Session
from .journal import Journal


def model_from_spec(m):
    """The OpenAI-compatible model the spec names; its key comes from the env var it names."""
    from ..agent.model import OpenAIModel

    key = m.api_key()
    if m.api_key_env and not key:
        raise BadInput(f"environment variable {m.api_key_env} (model.api_key_env) is not set: export the API key "
                       f"of {m.base_url} in it, or run with --offline to use declared fixes only")
    return OpenAIModel(m.base_url, m.name, key or "EMPTY", temperature=m.temperature, price_in=m.price_in,
                       price_out=m.price_out, max_tokens=m.max_tokens, timeout=m.timeout, max_retries=m.max_retries)


async def _connect_node(spec, node):
    """A worker node's connection; failing, the same error naming the node."""
    try:
        return await connect(spec.host_spec(node))
    except TransportError as e:  # host keys, refusals, dead hosts: one message each
        raise type(e)(f"node {node.label}: {e}") from None


async def run_spec(spec, directory: Path, *, offline: bool = False, ui=None, model=None,
                   on_session=None, on_ready=None) -> Session:
    """Run (or resume) the session in `directory`; returns it, ended. `on_session(ses)` is
    called before it runs (the background controller installs its stop handler there)."""
    os.umask(0o077)  # the session's files (raw logs, recordings) are the user's alone
    host = spec.host_spec()
    inner, opened = None, []
    try:
        if model is None and not offline and spec.model is not None:
            model = model_from_spec(spec.model)
        inner = await connect(host)
        for node in spec.nodes:
            opened.append((node, await _connect_node(spec, node)))
    except HarnessError as e:  # journaled, so `status` shows why a controller never got going
        for t in ([inner] if inner else []) + [t for _, t in opened]:
            await t.close()
        with Journal(Path(directory) / "journal.jsonl") as j:
            j.append("start_failed", error=" ".join(str(e).split())[:500])
        raise
    if on_ready:
        on_ready()
    notifier = None
    if spec.notify:
        from ..notify import Notifier

        notifier = Notifier(spec.notify, Path(directory).name)
        view, ui = ui, (lambda ev, st: (view and view(ev, st), notifier(ev, st)))
    recorder = Recorder(Path(directory) / "recording.jsonl")  # always on: what a replay serves back
    transport = RecordingTransport(inner, recorder)
    nodes = [(node, RecordingTransport(t, recorder, node.label),
              recording_opener(lambda n=node: connect(spec.host_spec(n)), recorder, node.label)) for node, t in opened]
    model = RecordingModel(model, recorder) if model is not None else None
    rtime = RecordingTime(recorder)
    ses = None
    try:
        process = secrets.token_hex(3)
        ses = Session(spec, directory, transport, model, offline=offline, ui=ui, clock=rtime.clock,
                      sleep=rtime.sleep, reopen=recording_opener(lambda: connect(host), recorder), process=process,
                      nodes=nodes)
        recorder.add("start", format=FORMAT, offline=offline, model=model and model.name,
                     probes=bool(model and model.probes),
                     journal_seq=len(ses.journal.events()), pid=os.getpid(), process=process)
        if on_session:
            on_session(ses)
        await ses.run()
        return ses
    finally:
        await (ses.transport if ses else transport).close()
        for t in ([link.t for link in ses.nodes] if ses else [t for _, t, _ in nodes]):
            await t.close()
        recorder.close()
        if notifier:
            notifier.close()
