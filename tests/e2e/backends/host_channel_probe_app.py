"""A backend that says which channels it inherited, for the launch
layer's tests (issue 32: the host channel in every start mode).

``--app host_channel_probe_app:create_backend``: the scenario backend, and
in ``ready.metadata``: ``host_env`` (``AGENTLANE_HOST_CHANNEL_FD`` as the
factory saw it, or null), ``extra`` (the descriptors above stderr open when
the factory runs, but the running event loop's own: a backend inherits
stdin, stdout, stderr and the declared channels only), ``fd4_socket``
(whether fd 4 is a socket). With a host channel, the factory writes ``{"hello": <pid>,
"fd": <n>}`` on it and a thread answers every line ``x`` with ``echo x``
until the channel ends.
"""

import asyncio
import dataclasses
import json
import os
import socket
import stat
import threading

import scenario_app


def _is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def _extra():
    """Open descriptors above 2, without the running loop's own (its
    selector and self-pipe, made before the factory runs)."""
    own = set()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        for name in ("_selector", "_ssock", "_csock"):
            thing = getattr(loop, name, None)
            if thing is not None:
                own.add(thing.fileno())
    listing = os.listdir("/proc/self/fd")
    return sorted(fd for fd in map(int, listing) if fd > 2 and fd not in own and _is_open(fd))


def _echo(channel):
    reader = channel.makefile("rb")
    for line in reader:
        channel.sendall(b"echo " + line)


def create_backend():
    value = os.environ.get("AGENTLANE_HOST_CHANNEL_FD")
    facts = {
        "app": "host-channel-probe",
        "pid": os.getpid(),
        "host_env": value,
        "extra": _extra(),
        "fd4_socket": _is_open(4) and stat.S_ISSOCK(os.fstat(4).st_mode),
    }
    if value is not None:
        fd = int(value)
        channel = socket.socket(fileno=os.dup(fd))
        os.close(fd)
        channel.sendall((json.dumps({"hello": os.getpid(), "fd": fd}) + "\n").encode())
        threading.Thread(target=_echo, args=(channel,), daemon=True).start()
    backend = scenario_app.create_backend()
    return dataclasses.replace(backend, ready_metadata=lambda: facts)
