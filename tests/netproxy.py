"""A TCP relay on 127.0.0.1 for tests, standing where a network or a NAT would: it forwards each
connection to a target port, and can be `cut` (a black hole: connections stay open and new ones
are accepted, but no byte goes through, as when a cable is pulled or a VPN drops) and `mend`ed,
or close connections idle longer than `idle_timeout` (a NAT dropping its mapping)."""

from __future__ import annotations

import select
import socket
import threading
import time


class Relay:
    def __init__(self, target_port: int, idle_timeout: float | None = None):
        self.target, self.idle_timeout = target_port, idle_timeout
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut = threading.Event()
        self.accepted = 0  # connections accepted so far
        self.idle_closed = 0  # connections closed by the idle timeout
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        self.listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            t = threading.Thread(target=self._pipe, args=(client,), daemon=True)
            t.start()
            self._threads.append(t)

    def _pipe(self, client: socket.socket) -> None:
        server = None
        try:
            while self.cut.is_set() and not self._stop.is_set():  # accepted into the black hole
                time.sleep(0.05)
            server = socket.create_connection(("127.0.0.1", self.target))
            ends, last = {client: server, server: client}, time.monotonic()
            while not self._stop.is_set():
                if self.cut.is_set():  # hold the bytes: nothing goes through, nothing is closed
                    time.sleep(0.05)
                    last = time.monotonic()
                    continue
                ready = select.select(list(ends), [], [], 0.05)[0]
                if not ready:
                    if self.idle_timeout is not None and time.monotonic() - last > self.idle_timeout:
                        self.idle_closed += 1
                        return
                    continue
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    ends[s].sendall(data)
                last = time.monotonic()
        except OSError:
            return
        finally:
            for s in (client, server):
                if s is not None:
                    s.close()

    def close(self) -> None:
        self._stop.set()
        self.listener.close()
