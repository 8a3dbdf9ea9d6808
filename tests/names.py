"""Names for what tests create that must not be shared with tests running beside them under
pytest-xdist: a session's name becomes its runs' ids (`<session>-<attempt>`), and a stop signals
every process on the machine carrying HARNESS_RUN_ID=<id>. Two tests with a session called
`session` would stop each other's runs."""

import uuid


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"
