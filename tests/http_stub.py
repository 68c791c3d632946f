"""A stand-in web server on 127.0.0.1 for CLI tests that talk to a tracker (`kmq stats`): it
answers every GET with what ``answer(path, asked_before)`` returns, and records the paths."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Callable, Iterator

Answer = tuple[int, bytes, str]  # status, body, content type


@contextmanager
def serving(answer: Callable[[str, int], Answer]) -> Iterator[tuple[str, list[str]]]:
    """Yields (its address, the paths asked so far)."""
    asked: list[str] = []

    class Server(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            status, body, content_type = answer(self.path, len(asked))
            asked.append(self.path)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", asked
    finally:
        server.shutdown()
        server.server_close()


def always(status: int, body: bytes, content_type: str = "application/json") -> Callable[[str, int], Answer]:
    return lambda path, n: (status, body, content_type)


def queue_list(rows: list[dict], **fields) -> bytes:
    """A tracker's /kmq/api/queues answer."""
    return json.dumps({"queues": rows, "total": len(rows), "workers": 1, "partial": False, **fields}).encode()
