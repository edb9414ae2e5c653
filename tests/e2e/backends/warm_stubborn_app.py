"""A deliberately stubborn app, for the warm start's containment tests
(``--app warm_stubborn_app:create_backend``; docs/prefork.md).

Its factory makes the backend ignore SIGTERM, SIGINT and SIGHUP, starts a
grandchild that ignores them too and has left the process group
(``setsid``), and a thread that never ends (not a daemon: the backend's
exit waits for it for ever, so neither ``shutdown`` nor stdin's end ends
it). It reports the pids on stderr: ``stubborn pids <backend> <parent>
<grandchild>``, then serves the scenario backend. Only SIGKILL ends it.
Cold, it is just as stubborn. ``create_tree_backend`` also starts a plain
grandchild (in the backend's process group).
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


def _grandchild(own_session):
    return subprocess.Popen(
        [sys.executable, "-c", _IGNORE_ALL],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=own_session,
    )


def _stubborn(plain_too):
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    plain = _grandchild(False) if plain_too else None
    grandchild = _grandchild(True)
    threading.Thread(target=_forever, name="never-ends", daemon=False).start()
    if plain is not None:
        print(f"stubborn tree {os.getpid()} {plain.pid} {grandchild.pid}", file=sys.stderr, flush=True)
    else:
        print(f"stubborn pids {os.getpid()} {os.getppid()} {grandchild.pid}", file=sys.stderr, flush=True)
    return scenario_app.create_backend()


def create_backend():
    return _stubborn(plain_too=False)


def create_tree_backend():
    """As ``create_backend``, with a plain grandchild too (in the backend's
    process group): the bridge's containment tests (issue 32). It says
    ``stubborn tree <backend> <plain> <setsid>`` on stderr."""
    return _stubborn(plain_too=True)
