"""How the test emulators serve (python3 standard library only): on
127.0.0.1 and `port` (0: a free one), announcing `PORT <n>` as the first stdout
line, exiting on SIGTERM and when stdin is a pipe that reaches EOF (the test
that started it died; tests/support/fixture_process.h keeps that pipe)."""

import os
import signal
import stat
import sys
import threading
from http.server import ThreadingHTTPServer


def serve(handler, port):
    """Serves `handler` (a BaseHTTPRequestHandler class) until told to exit."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)

    def exit_on_stdin_eof():
        sys.stdin.read()
        os._exit(0)

    if stat.S_ISFIFO(os.fstat(0).st_mode):  # Started by a test through a pipe.
        threading.Thread(target=exit_on_stdin_eof, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server.serve_forever()
