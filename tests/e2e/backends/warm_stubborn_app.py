"""A deliberately stubborn app, for the warm start's containment tests
(``--app warm_stubborn_app:create_backend``; docs/prefork.md).

Its factory makes the backend ignore SIGTERM, SIGINT and SIGHUP, starts a
grandchild that ignores them too and has left the process group
(``setsid``), and a thread that never ends (not a daemon: the backend's
exit waits for it for ever, so neither ``shutdown`` nor stdin's end ends
it). It reports the pids on stderr: ``stubborn pids <backend> <parent>
<grandchild>``, then serves the scenario backend. Only SIGKILL ends it.
Cold, it is just as stubborn.
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


def _forever():
    while True:
        time.sleep(1)


def create_backend():
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    grandchild = subprocess.Popen(
        [sys.executable, "-c", _IGNORE_ALL],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    threading.Thread(target=_forever, name="never-ends", daemon=False).start()
    print(f"stubborn pids {os.getpid()} {os.getppid()} {grandchild.pid}", file=sys.stderr, flush=True)
    return scenario_app.create_backend()
