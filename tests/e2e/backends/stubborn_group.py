"""Fake backend with a child, neither of which exits on its own (no agentlane
needed): for the bridge's shutdown escalation, which signals the backend's
whole process group.

Run: ``python tests/e2e/backends/stubborn_group.py [ignored args…]``.

It starts a child Python that ignores SIGTERM, SIGINT and SIGHUP and sleeps
(in the same process group), writes ``child <pid>`` to stderr and a valid
``ready`` line to stdout, then ignores the same signals, every command
(``shutdown`` included) and stdin EOF. Only SIGKILL ends either of them.
"""

import json
import signal
import subprocess
import sys
import time

IGNORE = "import signal, time\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP): signal.signal(s, signal.SIG_IGN)\ntime.sleep(3600)\n"

for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)

child = subprocess.Popen([sys.executable, "-c", IGNORE])
sys.stderr.write(f"child {child.pid}\n")
sys.stderr.flush()
ready = {
    "protocol_version": "1.0", "type": "ready", "ts": round(time.time(), 3),
    "version": "0.22.0", "package": "agentlane-process-bridge",
    "metadata": {"app": "stubborn-group"},
}
sys.stdout.write(json.dumps(ready, separators=(",", ":")) + "\n")
sys.stdout.flush()

for _ in sys.stdin:  # swallow commands, including shutdown
    pass
while True:
    time.sleep(3600)
