"""A loopback TCP proxy that can cut and restore connectivity (broker-outage tests).

The embedded broker keeps its data in memory (a restart loses it), so an outage is
made between the clients and a broker that keeps running: the broker advertises the
proxy's port, every client connects through it, and :meth:`TcpProxy.cut` closes every
connection and refuses new ones until :meth:`TcpProxy.restore`.
"""

from __future__ import annotations

import socket
import threading


class TcpProxy:
    """127.0.0.1:``port`` -> 127.0.0.1:``upstream_port``, one thread pair per connection.

    It holds its port from the start, cut or not (a bound socket that does not listen:
    connections are refused), so no other process can take it meanwhile: a port picked
    free and bound later was taken first in a loaded run."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._held = _bound(0)
        self.port = self._held.getsockname()[1]
        self.connections = 0

    def restore(self) -> "TcpProxy":
        """Accept connections (again)."""
        with self._lock:
            if self._listener is not None:
                return self
            ls, self._held = self._held, None
            ls.listen(128)
            self._listener = ls
        threading.Thread(target=self._accept, args=(ls,), daemon=True).start()
        return self

    def cut(self) -> None:
        """Close every connection and refuse new ones."""
        with self._lock:
            ls, self._listener = self._listener, None
            conns, self._conns = self._conns, []
        if ls is not None:
            _close(ls)  # shut down first: a close alone leaves it listening while _accept waits in it
        for c in conns:
            _close(c)
        with self._lock:
            if ls is not None:
                self._held = _bound(self.port)

    def close(self) -> None:
        """Cut, and give the port back."""
        self.cut()
        with self._lock:
            if self._held is not None:
                self._held.close()
                self._held = None

    def _accept(self, ls: socket.socket) -> None:
        while True:
            try:
                client, _ = ls.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._listener is not ls:  # cut meanwhile
                    _close(client)
                    _close(upstream)
                    return
                self._conns += [client, upstream]
                self.connections += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    _close(src)
    _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()


def _bound(port: int) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # bound again while its connections close
    s.bind(("127.0.0.1", port))
    return s
