"""Receives the custody service's webhooks and verifies their Standard Webhooks signature.

Standard library only (hmac, hashlib, base64): the `standardwebhooks` package on PyPI does the
same checks, and can replace verify() where you can install it.
Run: WEBHOOK_SECRET=whsec_... PORT=3000 python3 verify.py
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

TOLERANCE_S = 5 * 60


def signing_key(secret: str) -> bytes:
    # Secrets the service generated are whsec_ + base64; one you chose in another form is its UTF-8 bytes.
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[len("whsec_"):])
    return secret.encode("utf-8")


def verify(key: bytes, headers, body: bytes):
    msg_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not msg_id or not timestamp or not signatures:
        raise ValueError("missing webhook headers")
    # A timestamp far from now is a replay (or a clock problem): refuse it.
    if abs(time.time() - int(timestamp)) > TOLERANCE_S:
        raise ValueError("timestamp outside the tolerance")
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    # Several signatures during a secret rotation, space separated, each "v1,<base64>".
    for candidate in signatures.split(" "):
        version, _, value = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return json.loads(body)
    raise ValueError("no matching signature")


KEY = signing_key(os.environ.get("WEBHOOK_SECRET", ""))


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        # Verify the body exactly as received (bytes, not re-serialized JSON).
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        try:
            event = verify(KEY, self.headers, body)
        except ValueError as err:
            print(f"rejected: {err}", file=sys.stderr, flush=True)
            self.send_response(400)
            self.end_headers()
            return
        # webhook-id is the same on every retry of a delivery: use it to drop duplicates.
        print(json.dumps({"id": self.headers["webhook-id"], "event": event}), flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "3000"))), Handler)
print("listening", flush=True)
server.serve_forever()
