"""A TCP proxy on loopback that can stop forwarding without closing anything: a blackhole.

Each accepted client gets its own connection to the target; two threads copy bytes
each way. :meth:`BlackholeProxy.stop_forwarding` makes every copier stop reading, so
both ends' kernels still acknowledge what is sent (the sockets stay open and no error
reaches either side) while nothing arrives: a dead middlebox, or a path whose
firewall drops packets. New clients are accepted and left waiting the same way.
:meth:`resume` lets everything through again, buffered bytes first.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading

__all__ = ["BlackholeProxy"]


class BlackholeProxy:
    """Forward ``127.0.0.1:<port>`` to ``target`` until told to stop forwarding."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._forwarding = threading.Event()
        self._forwarding.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def stop_forwarding(self) -> None:
        """From now on nothing passes, in either direction, and nothing is closed."""
        self._forwarding.clear()

    def resume(self) -> None:
        """Forward again."""
        self._forwarding.set()

    def close(self) -> None:
        """Close every socket."""
        self._closed.set()
        self._forwarding.set()
        with self._lock:
            sockets, self._sockets = [self._listener, *self._sockets], []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _keep(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._keep(client)
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._forwarding.wait()
        try:
            upstream = socket.create_connection(self.target)
        except OSError:
            client.close()
            return
        self._keep(upstream)
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                self._forwarding.wait()
                ready, _, _ = select.select([source], [], [], 0.2)
                if not ready or not self._forwarding.is_set():
                    continue
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
