"""The errors this module raises, each with a stable ``kind``."""


class HostChannelError(RuntimeError):
    """The host channel could not serve a request.

    ``kind`` is the host's error kind (``store-error``, ``timeout``, ...) or
    one of this module's own (``channel-lost``, ``no-channel``, ...); see
    docs/host-channel.md.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class RevisionConflictError(HostChannelError, ValueError):
    """The host's store holds another revision than the one expected.

    A ``ValueError`` too, as agentlane's own ``JsonFileStateStore`` raises
    on a revision mismatch.
    """

    def __init__(self, message: str) -> None:
        super().__init__("revision-conflict", message)
