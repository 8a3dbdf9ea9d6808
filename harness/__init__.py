"""harness: an unattended training-debug harness for RL post-training runs.

Public API (deliberately small): the analyzer and the playbooks.
"""

import warnings

__version__ = "0.1.0"

# cryptography 51 deprecates DSA keys and asyncssh (2.24) still imports its DSA support, which prints a
# CryptographyDeprecationWarning on every start: not the user's concern, and not ours to print.
warnings.filterwarnings("ignore", message=r"DSA is deprecated", module=r"asyncssh(?:\.|$)")
