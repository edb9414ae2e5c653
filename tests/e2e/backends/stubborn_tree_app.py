"""The stubborn backend of the bridge's containment tests (issue 32):
``--app stubborn_tree_app:create_backend``.

Its factory makes the backend ignore SIGTERM, SIGINT and SIGHUP and starts
two grandchildren that ignore them too: a plain one (in the backend's
process group) and one in a session of its own (``setsid``), and a thread
that never ends (not a daemon: neither ``shutdown`` nor stdin's end ends
the backend). It says ``stubborn tree <backend> <plain> <setsid>`` on
stderr, then serves the scenario backend. Only SIGKILL ends any of them.
"""

import os
import signal
import subprocess
import sys
import threading
import time

import scenario_app

_IGNORE_ALL = (
    "import signal, time\n"
    "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
    "    signal.signal(s, signal.SIG_IGN)\n"
    "while True:\n"
    "    time.sleep(1)\n"
)


def _grandchild(own_session):
    return subprocess.Popen(
        [sys.executable, "-c", _IGNORE_ALL],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=own_session,
    )


def _forever():
    while True:
        time.sleep(1)


def create_backend():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    plain = _grandchild(False)
    detached = _grandchild(True)
    threading.Thread(target=_forever, name="never-ends", daemon=False).start()
    print(f"stubborn tree {os.getpid()} {plain.pid} {detached.pid}", file=sys.stderr, flush=True)
    return scenario_app.create_backend()
