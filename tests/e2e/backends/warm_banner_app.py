"""An app whose import does what warm and cold must agree on, or the README
must say where they differ (issue 29): it writes a banner and a warning on
stderr, installs a SIGCHLD handler, and registers an ``atexit`` handler.

``--app warm_banner_app:create_backend``: the scenario backend, and in
``ready.metadata``: ``sigchld`` (the name of the SIGCHLD handler the
backend has) and ``atexit`` (how many times this process has run the
import's exit handler before: 0 in a fresh process).
"""

import atexit
import dataclasses
import signal
import sys
import warnings

import scenario_app

print("banner: warm_banner_app imported", file=sys.stderr)
warnings.warn("an import-time warning", stacklevel=1)


def on_child(signum, frame):
    """The app's own SIGCHLD handler."""


signal.signal(signal.SIGCHLD, on_child)
_exits = []
atexit.register(lambda: _exits.append(1))


def create_backend():
    """The scenario backend with this process's import-time state in ``ready``."""
    handler = signal.getsignal(signal.SIGCHLD)
    facts = {"app": "warm-banner", "sigchld": getattr(handler, "__name__", str(handler)), "atexit": len(_exits)}
    backend = scenario_app.create_backend()
    return dataclasses.replace(backend, ready_metadata=lambda: facts)
