#!/usr/bin/env python3
"""A recording pass-through proxy between Kasten and a local LLM server (stdlib only).

    record-proxy.py LISTEN_PORT UPSTREAM_URL LOG_FILE

Forwards every request to UPSTREAM_URL unchanged and appends one JSON line per
chat-completion call to LOG_FILE: what Kasten asked for (response_format type, schema
name, whether the call is a repair retry) and what came back (HTTP status, wall time,
the server's token counts and timings, whether the answer parses as JSON). It is what
lets scripts/live-llm-test prove the protocol from the wire rather than from Kasten's
own account of it.
"""

import http.client
import json
import select
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authorization", "proxy-authenticate", "content-length", "host"}


def main() -> None:
    port, upstream, log_path = int(sys.argv[1]), urllib.parse.urlsplit(sys.argv[2]), sys.argv[3]
    lock = threading.Lock()

    def record(entry: dict) -> None:
        with lock, open(log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet: the log file is the record
            pass

        def forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            started = time.monotonic()
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=600)
            finished = threading.Event()
            abandoned = threading.Event()
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                # If the client gives up (e.g. Kasten's request timeout), hang up upstream too,
                # so the model server cancels the work instead of finishing it for nobody.
                threading.Thread(target=self.watch_client, args=(conn, finished, abandoned),
                                 daemon=True).start()
                resp = conn.getresponse()
                data = resp.read()
                status, resp_headers = resp.status, resp.getheaders()
            except (OSError, http.client.HTTPException) as e:
                data = json.dumps({"error": {"message": f"proxy: upstream failed: {e}"}}).encode()
                status, resp_headers = 502, [("Content-Type", "application/json")]
            finally:
                finished.set()
                conn.close()
            elapsed_ms = (time.monotonic() - started) * 1000
            if abandoned.is_set():
                if self.path.rstrip("/").endswith("/chat/completions") and body:
                    record({**describe(body, 499, b"", elapsed_ms), "abandoned_by_client": True})
                self.close_connection = True
                return
            self.send_response(status)
            for k, v in resp_headers:
                if k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            if self.path.rstrip("/").endswith("/chat/completions") and body:
                record(describe(body, status, data, elapsed_ms))

        def watch_client(self, conn, finished, abandoned) -> None:
            while not finished.wait(0.2):
                try:
                    readable, _, _ = select.select([self.connection], [], [], 0)
                    closed = bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    closed = True
                if closed:
                    abandoned.set()
                    try:
                        conn.sock.shutdown(socket.SHUT_RDWR)
                    except (OSError, AttributeError):
                        pass
                    return

        do_GET = do_POST = do_PUT = do_DELETE = forward

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


def describe(body: bytes, status: int, data: bytes, elapsed_ms: float) -> dict:
    entry: dict = {"status": status, "ms": round(elapsed_ms, 1)}
    try:
        req = json.loads(body)
    except ValueError:
        return {**entry, "request_json": False}
    rf = req.get("response_format") or {}
    messages = req.get("messages") or []
    entry.update(
        response_format=rf.get("type"),
        schema_name=(rf.get("json_schema") or {}).get("name"),
        strict=(rf.get("json_schema") or {}).get("strict"),
        # a repair retry sends the bad answer back as an assistant message
        repair=any(m.get("role") == "assistant" for m in messages),
        messages=len(messages),
        max_tokens=req.get("max_tokens"),
        stream=req.get("stream"),
    )
    try:
        resp = json.loads(data)
    except ValueError:
        return entry
    usage = resp.get("usage") or {}
    timings = resp.get("timings") or {}
    choices = resp.get("choices") or [{}]
    content = ((choices[0].get("message") or {}).get("content")) or ""
    try:
        json.loads(content)
        answer_json = True
    except ValueError:
        answer_json = False
    entry.update(
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        prompt_ms=timings.get("prompt_ms"),
        predicted_ms=timings.get("predicted_ms"),
        finish_reason=choices[0].get("finish_reason"),
        answer_json=answer_json,
        answer=content[:300],
    )
    if status >= 400:
        entry["error"] = str(resp.get("error"))[:300]
    return entry


if __name__ == "__main__":
    main()
