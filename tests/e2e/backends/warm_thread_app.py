"""An app that starts a thread when it is imported (as some client
libraries do): forking it is not safe, and the prefork server refuses it
with the code ``threads`` (docs/prefork.md). Cold, it works.

``--app warm_thread_app:create_backend`` (the scenario backend).
"""

import threading
import time

from scenario_app import create_backend  # noqa: F401 - the factory

threading.Thread(target=time.sleep, args=(3600,), name="import-time-poller", daemon=True).start()
