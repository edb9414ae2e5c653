"""A deliberately stubborn backend, for the containment tests.

It writes a valid `ready` event, then ignores SIGTERM, SIGINT and SIGHUP,
the `shutdown` command and stdin EOF, and starts a grandchild that does the
same and has left its process group (`setsid`), as a daemon a tool starts
would (with `--same-group`, the grandchild stays in the group). It reports the pids on stderr: `stubborn pids <self> <parent>
<grandchild>` (the parent is `uv` when run through `uv run`).

Plain Python 3, no agentlane needed.
"""
import json
import os
import signal
import subprocess
import sys
import time

for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)

if "--grandchild" in sys.argv:
    while True:
        time.sleep(1)

grandchild = subprocess.Popen(
    [sys.executable, __file__, "--grandchild"],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    start_new_session="--same-group" not in sys.argv,
)
ready = {
    "protocol_version": "1.0",
    "type": "ready",
    "ts": time.time(),
    "version": "0.0.0",
    "package": "stubborn",
    "metadata": {},
}
sys.stdout.write(json.dumps(ready) + "\n")
sys.stdout.flush()
sys.stderr.write(f"stubborn pids {os.getpid()} {os.getppid()} {grandchild.pid}\n")
sys.stderr.flush()
# Reads commands and answers none of them (shutdown included); EOF changes nothing.
for _ in sys.stdin:
    pass
while True:
    time.sleep(1)
