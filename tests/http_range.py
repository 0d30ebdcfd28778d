"""A static file server on 127.0.0.1 that honours HTTP Range requests (RFC 9110 section 14),
with an ETag (MD5): what the data stager's https:// tests and benchmark download from."""

from __future__ import annotations

import hashlib
import http.server
import sys
import threading
import time
from functools import partial
from pathlib import Path

_ETAGS: dict[tuple[str, float, int], str] = {}


def _md5(path: Path) -> str:
    """The file's MD5 (its ETag), computed once per (path, mtime, size)."""
    st = path.stat()
    key = (str(path), st.st_mtime, st.st_size)
    if key not in _ETAGS:
        _ETAGS[key] = hashlib.md5(path.read_bytes()).hexdigest()
    return _ETAGS[key]


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _target(self) -> Path | None:
        path = Path(self.translate_path(self.path))
        return path if path.is_file() else None

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        path = self._target()
        if path is None:
            self.send_error(404)
            return
        size = path.stat().st_size
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start, end, status = int(a), min(int(b) if b else size - 1, size - 1), 206
        self.send_response(status)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"' + _md5(path) + '"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if body:
            self._send_range(path, start, end - start + 1)

    def _send_range(self, path: Path, start: int, left: int) -> None:
        """Write the bytes, paced to `rate` bytes/s per connection when set (a WAN flow's
        window/RTT ceiling, which is what parallel connections get around)."""
        rate, t0, sent = getattr(self.server, "rate", None), time.monotonic(), 0
        with open(path, "rb") as f:
            f.seek(start)
            while left > 0:
                block = f.read(min(left, 256 * 1024))
                self.wfile.write(block)
                left, sent = left - len(block), sent + len(block)
                if rate:
                    time.sleep(max(0.0, sent / rate - (time.monotonic() - t0)))


def serve(folder: Path, rate: float | None = None) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Start serving `folder` on a free 127.0.0.1 port in a daemon thread; (server, base URL).
    `rate`: bytes/s per connection (None: as fast as it goes)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(RangeHandler, directory=str(folder)))
    server.daemon_threads = True
    server.rate = rate
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


if __name__ == "__main__":  # python tests/http_range.py DIR [MB_PER_S_PER_CONNECTION]: prints the URL
    srv, base = serve(Path(sys.argv[1]), float(sys.argv[2]) * 2**20 if len(sys.argv) > 2 else None)
    print(base, flush=True)
    threading.Event().wait()
