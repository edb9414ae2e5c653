"""An app whose import never ends (it waits for a service that never
answers): the prefork server never becomes ready (issue 29).

``--app warm_hang_app:create_backend``.
"""

import time

time.sleep(3600)

from scenario_app import create_backend  # noqa: E402,F401 - never reached
