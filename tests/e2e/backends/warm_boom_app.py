"""An app whose import raises: the prefork server refuses it with
``import-failed``, its traceback in the server's log (issue 29).

``--app warm_boom_app:create_backend``.
"""

raise RuntimeError("boom at import")
