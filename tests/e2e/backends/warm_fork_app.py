"""An app that ``os.fork()``s when it is imported (a pre-fork worker of its
own): the child is a copy of the importing process, holding everything it
held, and sleeps for an hour (issue 29). It says its pid on stderr
(``import-time child <pid>``).

``--app warm_fork_app:create_backend`` (the scenario backend).
"""

import os
import sys
import time

from scenario_app import create_backend  # noqa: F401 - the factory

_child = os.fork()
if _child == 0:
    time.sleep(3600)
    os._exit(0)
print(f"import-time child {_child}", file=sys.stderr)
