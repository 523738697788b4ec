"""A webhook receiver that checks what a Standard Webhooks receiver checks,
with the reference library (`standardwebhooks` on PyPI), not ours.

Run by crates/notify/tests/webhook.rs, never by hand:

    receiver.py <secret> <answers>

`answers` is a comma-separated list of HTTP statuses given to verified
requests in turn (the last one repeats); a request that fails verification
is answered 400. Prints `listening <port>`, then one JSON line per request:
{"verified", "error", "id", "status", "payload"}.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook

HOOK = Webhook(sys.argv[1])
ANSWERS = [int(status) for status in sys.argv[2].split(",")]
LOCK = threading.Lock()
SEEN = [0]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            payload, verified, error = HOOK.verify(body, headers), True, None
        except Exception as exc:  # the library's verification error
            payload, verified, error = None, False, str(exc)
        with LOCK:
            status = ANSWERS[min(SEEN[0], len(ANSWERS) - 1)] if verified else 400
            SEEN[0] += 1
            print(
                json.dumps(
                    {
                        "verified": verified,
                        "error": error,
                        "id": headers.get("webhook-id"),
                        "status": status,
                        "payload": payload,
                    }
                ),
                flush=True,
            )
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


SERVER = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {SERVER.server_address[1]}", flush=True)
SERVER.serve_forever()
