"""Fake backend that never exits on its own (no agentlane needed).

Run: ``python tests/e2e/backends/ignores_shutdown.py`` (any Python 3, any cwd).

It writes a valid ``ready`` line, then ignores SIGTERM, SIGINT and SIGHUP,
keeps reading (and discarding) stdin, and sleeps forever even after stdin
EOF. Only SIGKILL stops it, which is what the host's shutdown escalation
(``shutdown`` command, then SIGKILL after the grace period) must do.
"""

import json
import signal
import sys
import time

for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)

ready = {
    "protocol_version": "1.0", "type": "ready", "ts": round(time.time(), 3),
    "version": "0.22.0", "package": "agentlane-process-bridge",
    "metadata": {"app": "ignores-shutdown"},
}
sys.stdout.write(json.dumps(ready, separators=(",", ":")) + "\n")
sys.stdout.flush()

for _ in sys.stdin:  # swallow commands, including shutdown
    pass
while True:
    time.sleep(3600)
