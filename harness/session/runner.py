"""Open what a session needs (the host, the model) from its spec, run it, close everything."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import BadInput
from ..record import FORMAT, Recorder, RecordingModel, RecordingTime, RecordingTransport
from ..remote.transport import connect
from .controller import Session


def model_from_spec(m):
    """The OpenAI-compatible model the spec names; its key comes from the env var it names."""
    from ..agent.model import OpenAIModel

    key = m.api_key()
    if m.api_key_env and not key:
        raise BadInput(f"environment variable {m.api_key_env} (model.api_key_env) is not set: export the API key "
                       f"of {m.base_url} in it, or run with --offline to use declared fixes only")
    return OpenAIModel(m.base_url, m.name, key or "EMPTY", temperature=m.temperature, price_in=m.price_in,
                       price_out=m.price_out, max_tokens=m.max_tokens, timeout=m.timeout, max_retries=m.max_retries)


async def run_spec(spec, directory: Path, *, offline: bool = False, ui=None, model=None,
                   on_session=None) -> Session:
    """Run (or resume) the session in `directory`; returns it, ended. `on_session(ses)` is
    called before it runs (the background controller installs its stop handler there)."""
    if model is None and not offline and spec.model is not None:
        model = model_from_spec(spec.model)
    notifier = None
    if spec.notify:
        from ..notify import Notifier

        notifier = Notifier(spec.notify, Path(directory).name)
        view, ui = ui, (lambda ev, st: (view and view(ev, st), notifier(ev, st)))
    inner = await connect(spec.host_spec())
    recorder = Recorder(Path(directory) / "recording.jsonl")  # always on: what a replay serves back
    transport = RecordingTransport(inner, recorder)
    model = RecordingModel(model, recorder) if model is not None else None
    rtime = RecordingTime(recorder)
    try:
        ses = Session(spec, directory, transport, model, offline=offline, ui=ui, clock=rtime.clock, sleep=rtime.sleep)
        recorder.add("start", format=FORMAT, offline=offline, model=model and model.name,
                     journal_seq=len(ses.journal.events()), pid=os.getpid())
        if on_session:
            on_session(ses)
        await ses.run()
        return ses
    finally:
        await transport.close()
        recorder.close()
        if notifier:
            notifier.close()
