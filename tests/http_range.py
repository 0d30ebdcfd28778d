"""A static file server on 127.0.0.1 that honours HTTP Range requests (RFC 9110 section 14),
with an ETag (MD5): what the data stager's https:// tests and benchmark download from."""

from __future__ import annotations

import hashlib
import http.server
import threading
from functools import partial
from pathlib import Path


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
        data = path.read_bytes()
        start, end, status = 0, len(data) - 1, 200
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start, end, status = int(a), min(int(b) if b else len(data) - 1, len(data) - 1), 206
        self.send_response(status)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"' + hashlib.md5(data).hexdigest() + '"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.end_headers()
        if body:
            self.wfile.write(data[start:end + 1])


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Start serving `folder` on a free 127.0.0.1 port in a daemon thread; (server, base URL)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(RangeHandler, directory=str(folder)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
