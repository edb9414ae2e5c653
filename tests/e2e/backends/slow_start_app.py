"""The scenario backend behind an import that takes a while without using
the CPU, for the start-slot test of agentlane-bridge
(__test__/bridge-abuse.test.ts): how many backends import at once is then
what the bridge lets start at once, whatever the machine's load.

``--app slow_start_app:create_backend``: importing this module appends
``start <pid> <time>`` to the file ``$SLOW_START_LOG``, sleeps
``$SLOW_START_SECONDS`` (default 1), then appends ``end <pid> <time>``
(``time.time()``); the factory is the scenario app's.
"""

from __future__ import annotations

import os
import time

import scenario_app


def _note(word: str) -> None:
    path = os.environ.get("SLOW_START_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{word} {os.getpid()} {time.time():.6f}\n")


_note("start")
time.sleep(float(os.environ.get("SLOW_START_SECONDS", "1")))
_note("end")

create_backend = scenario_app.create_backend
