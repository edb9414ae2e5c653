"""An app that starts a process when it is imported (a helper daemon, a
local model server): no thread, so the prefork server accepts it, and the
process is the server's child, not a conversation's (issue 29).

``--app warm_popen_app:create_backend`` (the scenario backend). The
import-time process sleeps for an hour and says its pid on stderr
(``import-time child <pid>``).
"""

import subprocess
import sys

from scenario_app import create_backend  # noqa: F401 - the factory

HELPER = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
print(f"import-time child {HELPER.pid}", file=sys.stderr)
