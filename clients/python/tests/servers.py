"""Real loopback servers that fail in scripted ways, so that the tests get real exceptions from
httpx, requests and urllib rather than hand-built ones."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Reply:
    """One scripted HTTP answer."""

    def __init__(self, status: int, body: str = "", headers: Mapping[str, str] = {}) -> None:
        self.status = status
        self.body = body.encode()
        self.headers = dict(headers)


@contextmanager
def http_server(replies: Sequence[Reply]) -> Iterator[str]:
    """Serves `replies` in order (the last one from then on) on 127.0.0.1:0; yields the base URL."""
    lock = threading.Lock()
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with lock:
                reply = replies[min(served[0], len(replies) - 1)]
                served[0] += 1
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep test output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll interval: shutdown() waits for it.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), name="test-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_server() -> Iterator[str]:
    """A listener that accepts connections and never answers: reads time out. Yields its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@contextmanager
def plain_server() -> Iterator[tuple[str, int]]:
    """A plain TCP listener that answers every connection with a plain-text HTTP 400 and closes
    it, as an HTTP server does when spoken TLS to: a TLS handshake with it fails (ssl.SSLError,
    "wrong version number"). Yields its host and port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # shut down
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    thread = threading.Thread(target=serve, name="test-plain", daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", listener.getsockname()[1]
    finally:
        # Closing alone would leave the thread blocked in accept() on Linux; shutdown wakes it.
        try:
            listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        listener.close()
        thread.join(5)


def refused_address() -> tuple[str, int]:
    """A loopback port where nothing listens (bound, then released): connecting is refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return "127.0.0.1", port
