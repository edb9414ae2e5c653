"""Fake backend that dies in the middle of a protocol line (no agentlane needed).

Run: ``python tests/e2e/backends/dies_midline.py`` (any Python 3, any cwd).

It writes a valid ``ready`` line, then the first half of a ``run_event`` line
without a newline, flushes, and exits at once with status 3 via ``os._exit``
(no cleanup, like a crash). A host must deliver the unterminated fragment as
a final line (which fails decoding) and then report the exit.
"""

import json
import os
import sys
import time

READY = {
    "protocol_version": "1.0", "type": "ready", "ts": round(time.time(), 3),
    "version": "0.22.0", "package": "agentlane-process-bridge",
    "metadata": {"app": "dies-midline"},
}
PARTIAL = '{"protocol_version":"1.0","type":"run_event","ts":1767225601.1,"event":{"type":"agent_st'

out = sys.stdout.buffer
out.write(json.dumps(READY, separators=(",", ":")).encode() + b"\n")
out.flush()
time.sleep(0.2)  # let the host see ready on its own first
out.write(PARTIAL.encode())
out.flush()
os._exit(3)
