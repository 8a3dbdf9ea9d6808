"""Replay a recorded session: the real controller against the recording (tape.py), and the
comparison of what it did with what the recorded one did (run.py)."""
