"""The link to the training host: transports (asyncssh, paramiko, local), detached launches,
log following. Everything here does I/O; everything is async."""
