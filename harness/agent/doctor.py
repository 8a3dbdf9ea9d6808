"""`harness doctor`'s checks of the spec's model: the key variable, the endpoint reachable and
serving the model (`/v1/models`), which protocol `actions: auto` picks, one round trip. Each is
bounded to seconds: a bad base_url is reported at once, not after a minute of retries in a run."""

from __future__ import annotations

import time

import openai

from ..errors import ModelError
from ..redact import redact
from .protocol import probe

LIST_TIMEOUT = 5.0    # seconds for GET /models
PROBE_TIMEOUT = 30.0  # seconds for the probe (a cold model may take a while to answer)


async def model_checks(m) -> list[tuple[str, bool, str]]:
    """(name, ok, detail) per check of a ModelSpec; stops after the first that fails."""
    from .model import OpenAIModel

    key = m.api_key()
    if m.api_key_env and not key:
        return [("model key", False, f"environment variable {m.api_key_env} (model.api_key_env) is not set: "
                 "export the endpoint's key in it")]
    out = [("model key", True, f"{m.api_key_env} is set" if m.api_key_env else "no key needed (model.api_key_env unset)")]
    model = OpenAIModel(m.base_url, m.name, key or "EMPTY", max_tokens=64, timeout=PROBE_TIMEOUT, max_retries=0)
    try:
        return out + await _endpoint(m, model)
    finally:
        await model.aclose()


async def _endpoint(m, model) -> list[tuple[str, bool, str]]:
    listed = await _served(model)
    if isinstance(listed, str):
        return [("model endpoint", False, listed)]
    if listed and m.name not in listed:
        shown = ", ".join(listed[:8]) + (" …" if len(listed) > 8 else "")
        return [("model endpoint", False, f"{m.base_url} does not serve {m.name!r} (it serves: {shown}); "
                 "fix model.name")]
    out = [("model endpoint", True, f"{m.base_url} serves {m.name!r}" if listed else
            f"{m.base_url} answers (it lists no models; {m.name!r} is tried below)")]
    t0 = time.monotonic()
    try:
        if m.actions == "auto":
            mode, why, _ = await probe(model)
        else:
            mode, why = m.actions, "model.actions"
            await model.complete([{"role": "user", "content": "Say ok."}], [])
    except ModelError as e:
        return out + [("model protocol", False, str(e))]
    seconds = time.monotonic() - t0
    learned = f"; learned: {'; '.join(model.adapted)}" if model.adapted else ""
    return out + [("model protocol", True, f"{mode} ({why}); one round trip {seconds * 1000:.0f} ms{learned}")]


async def _served(model) -> list[str] | str:
    """The model ids the endpoint lists, or a one-line reason it cannot be reached."""
    url = model.base_url
    try:
        page = await model.client().with_options(timeout=LIST_TIMEOUT).models.list()
    except openai.APITimeoutError:
        return f"{url} did not answer within {LIST_TIMEOUT:g}s: check model.base_url and that the server is up"
    except openai.APIConnectionError as e:
        return redact(f"cannot reach {url}: {e.__cause__ or e.message}; check model.base_url")
    except openai.APIStatusError as e:
        if e.status_code == 401:
            return f"{url} refused the key (401): check the key in the variable model.api_key_env names"
        if e.status_code == 404:
            return []  # some servers have no /models: the probe decides
        return f"{url}/models answered {e.status_code}: check model.base_url (it ends in /v1 for most servers)"
    except openai.OpenAIError as e:
        return redact(f"{url}/models gave an unusable answer ({e}): is this an OpenAI-compatible endpoint?")
    return [str(d.id) for d in page.data]
