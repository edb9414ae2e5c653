"""Fake backend with a child, neither of which exits on its own (no agentlane
needed): for the bridge's shutdown escalation, which signals the backend's
whole process group.

Run: ``python tests/e2e/backends/stubborn_group.py [ignored args…]``.

It starts ``ignores_shutdown.py`` as a child in the same process group (its
stdout and stdin detached), writes ``child <pid>`` to stderr, then becomes
``ignores_shutdown.py`` itself: a valid ``ready`` line, then SIGTERM,
SIGINT, SIGHUP, every command and stdin EOF ignored. Only SIGKILL ends
either of them.
"""

import runpy
import subprocess
import sys
from pathlib import Path

stubborn = str(Path(__file__).with_name("ignores_shutdown.py"))
child = subprocess.Popen([sys.executable, stubborn], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
sys.stderr.write(f"child {child.pid}\n")
sys.stderr.flush()
runpy.run_path(stubborn, run_name="__main__")
