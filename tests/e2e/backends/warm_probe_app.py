"""A backend that says in its ``ready`` metadata what its process looks like,
for the warm start's tests (the prefork server, docs/prefork.md): the
scenario app (``scenario_app``) with facts added.

``--app warm_probe_app:create_backend``: the scenario backend, and in
``ready.metadata``: ``pid``; ``random``, ``uuid``, ``secret`` (fresh values:
every fork must draw its own); ``factory_calls`` (a module-level counter the
factory increments: a fork starts from the value the module had when it was
imported, so it is 1 in every conversation, warm or cold); ``imported_in``
(the pid that imported this module: the prefork server's when warm, the
backend's own when cold: module-level state is what conversations share);
``argv``, ``path0``, ``main_file``, ``main_spec``, ``stdin``/``stdout``
(``isatty``, ``line_buffering``) — what ``python -m agentlane_process_bridge``
gives.

``--app warm_probe_app:failing_backend``: a factory that raises.
"""

import dataclasses
import os
import random
import secrets
import sys
import uuid

import scenario_app

IMPORTED_IN = os.getpid()
FACTORY_CALLS = 0


def create_backend():
    """The scenario backend with the facts of this process in ``ready``."""
    global FACTORY_CALLS
    FACTORY_CALLS += 1
    main = sys.modules["__main__"]
    facts = {
        "app": "warm-probe",
        "pid": os.getpid(),
        "random": random.random(),
        "uuid": str(uuid.uuid4()),
        "secret": secrets.token_hex(16),
        "factory_calls": FACTORY_CALLS,
        "imported_in": IMPORTED_IN,
        "argv": list(sys.argv),
        "path0": sys.path[0],
        "main_file": getattr(main, "__file__", None),
        "main_spec": getattr(getattr(main, "__spec__", None), "name", None),
        "stdio": [[s.isatty(), s.line_buffering, s.write_through] for s in (sys.stdin, sys.stdout, sys.stderr)],
        "pgid": os.getpgid(0),
    }
    backend = scenario_app.create_backend()
    return dataclasses.replace(backend, ready_metadata=lambda: facts)


def failing_backend():
    """A factory that raises (as an app's misconfiguration would)."""
    raise RuntimeError("the factory failed on purpose")
