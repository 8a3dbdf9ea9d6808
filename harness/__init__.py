"""harness: an unattended training-debug harness for RL post-training runs.

Public API (deliberately small): the analyzer and the playbooks.
"""

__version__ = "0.1.0"
