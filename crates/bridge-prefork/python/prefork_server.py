"""The prefork server of process-bridge-native (docs/prefork.md).

Started by the host as ``<interpreter invocation> -c <this source> <protocol>
<channel table> <module:factory> <supervisor>``, under the native supervisor, with stdin the
*request channel* (an AF_UNIX stream socket) and stdout/stderr the server's
log. It imports ``agentlane_process_bridge`` and the app's module once,
checks that forking is safe, answers ``ready`` (or a refusal with a stable
code), and then forks one backend per request:

    server --fork--> C --fork--> B (the backend: the app's factory, through
                     |           agentlane_process_bridge's own ``main``)
                     `--exec--> process-bridge-supervisor --adopt <B>

so that every conversation is contained exactly as a cold one is: B in a
process group of its own under a supervisor of its own, whose fd 3 is the
conversation's control socket. The server keeps none of a conversation's
descriptors after the fork, and only reaps its C children.

Standard library only; Python 3.9+ (``socket.recv_fds``). Typed: ``mypy
--strict --python-version 3.9`` passes (run by hand; the suites run the
server through the real backend). Annotations are not evaluated at run time.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
from types import FrameType, ModuleType
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Union

# A signal's disposition as `signal.getsignal` gives it.
_Handler = Union[Callable[[int, Optional[FrameType]], Any], int, signal.Handlers, None]

_PROTOCOL = 2
# A fork request is exactly this many bytes (docs/prefork.md): a JSON object
# padded with spaces, then a newline. Reading exactly one request per
# message keeps its descriptors with it on every Unix.
_REQUEST_BYTES = 128
_PR_SET_CHILD_SUBREAPER = 36
_MSG_CTRUNC = getattr(socket, "MSG_CTRUNC", 0)


class Layout:
    """The channels a backend inherits, by name and number, as the host's
    launch layer defines them (``crates/bridge-launch``), from the server's
    argument: this file writes no descriptor number down. A fork request's
    descriptors come in the table's order: the first ``required`` always,
    then the declared ones (the host channel)."""

    def __init__(self, text: str) -> None:
        import json

        table = json.loads(text)
        channels: Dict[str, int] = {str(k): int(v) for k, v in table["channels"].items()}
        self.names: List[str] = sorted(channels, key=lambda name: channels[name])
        self.fds = channels
        self.required = int(table["required"])
        self.host_env = str(table["host_env"])
        if [channels.get(n) for n in ("stdin", "stdout", "stderr")] != [0, 1, 2] or not (
            "control" in channels and "host" in channels and 4 <= self.required <= len(channels)
        ):
            raise ValueError(f"not a channel table this server can use: {text}")

    @property
    def control(self) -> int:
        return self.fds["control"]

    @property
    def host(self) -> int:
        return self.fds["host"]


class Refusal(Exception):
    """The server cannot serve this app: a stable code and a message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _line(obj: Dict[str, Any]) -> bytes:
    """One line of the channel: compact JSON, then a newline."""
    import json

    return (json.dumps(obj, separators=(",", ":")) + "\n").encode("utf-8")


def _log(message: str) -> None:
    try:
        sys.stderr.write(f"prefork-server: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


# ---- start: what `python -m agentlane_process_bridge --app X` would see ----


def _as_if_run_with_m(app: str) -> ModuleType:
    """Gives the app the interpreter state ``-m agentlane_process_bridge`` gives.

    ``-c`` puts ``''`` first on ``sys.path`` where ``-m`` puts the absolute
    cwd, has ``sys.argv[0] == '-c'`` and a bare ``__main__``. ``-m`` runs
    the bridge's ``__main__.py`` as ``__main__``: its file, spec and names,
    and ``sys.argv`` ``[<that file>, '--app', X]``.
    """
    if sys.path and sys.path[0] == "":
        sys.path[0] = os.getcwd()
    import importlib
    import importlib.util
    import types

    try:
        importlib.import_module("agentlane_process_bridge")
    except BaseException as exc:  # noqa: BLE001 - the app's environment is reported, whatever it raised
        raise Refusal("import-failed", f"cannot import agentlane_process_bridge: {exc!r}") from exc
    spec = importlib.util.find_spec("agentlane_process_bridge.__main__")
    if spec is None or spec.loader is None:
        raise Refusal("import-failed", "agentlane_process_bridge has no __main__ module")
    loader: Any = spec.loader
    origin = str(spec.origin)
    module = types.ModuleType("__main__")
    module.__spec__ = spec
    module.__file__ = origin
    module.__loader__ = loader
    module.__package__ = "agentlane_process_bridge"
    module.__dict__["__builtins__"] = __builtins__
    # Any name but "__main__" while its code runs: its last line would run
    # the bridge here (`if __name__ == "__main__": raise SystemExit(main())`).
    module.__name__ = "__prefork_main__"
    exec(loader.get_code(spec.name), module.__dict__)  # noqa: S102 - the bridge's own code
    module.__name__ = "__main__"
    sys.modules["__main__"] = module
    sys.argv = [origin, "--app", app]
    # What was before `-c` (interpreter options) stays (3.10+).
    orig_argv: Optional[List[str]] = getattr(sys, "orig_argv", None)
    if orig_argv is not None and "-c" in orig_argv:
        at = orig_argv.index("-c")
        orig_argv[at:] = ["-m", "agentlane_process_bridge", "--app", app]
    return module


def _load_app(main_module: ModuleType, app: str) -> None:
    """Imports the app's module once; the factory itself runs per conversation."""
    try:
        module_name, attribute = main_module.parse_app_reference(app)
    except ValueError as exc:
        raise Refusal("bad-app", f"agentlane_process_bridge: {exc}") from exc
    import importlib

    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:  # noqa: BLE001 - whatever the app's import raised
        import traceback

        traceback.print_exc()
        raise Refusal("import-failed", f"agentlane_process_bridge: {exc}") from exc
    factory = getattr(module, attribute, None)
    if factory is None:
        raise Refusal("bad-app", f"agentlane_process_bridge: module '{module_name}' has no attribute '{attribute}'")
    if not callable(factory):
        raise Refusal("bad-app", f"agentlane_process_bridge: Backend reference is not callable: {app}")


def _prepare_forks(app: str) -> None:
    """What every fork would otherwise do first, done once here.

    Library code only (the app's factory never runs here): the modules a
    conversation's process needs before the backend runs (``ctypes`` for
    ``prctl``, ``fcntl``), and the bridge's own first steps warmed, so that
    each backend inherits them (``argparse`` compiles its patterns on the
    first parse; ``asyncio.run`` builds its first loop). Measured: about
    10 ms of a backend's start (ctypes alone 5-15 ms under load).
    """
    global _prctl
    import argparse
    import asyncio
    import fcntl  # noqa: F401 - for _place, in every conversation

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _prctl = None
    parser = argparse.ArgumentParser(prog="python -m agentlane_process_bridge")
    parser.add_argument("--app", required=True)
    parser.parse_args(["--app", app])

    async def nothing() -> None:
        await asyncio.sleep(0)

    asyncio.run(nothing())


# `prctl` from libc, on Linux (`_prepare_forks`).
_prctl: Optional[Callable[..., int]] = None


def _check_fork_safety() -> None:
    """One thread and no running event loop, or a refusal saying which."""
    import threading

    names = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if names:
        raise Refusal("threads", f"the app started {len(names)} thread(s) at import ({', '.join(names)}): forking it is not safe")
    if sys.platform.startswith("linux"):
        try:
            native = len(os.listdir("/proc/self/task"))
        except OSError:
            native = 1
        if native > 1:
            raise Refusal("threads", f"the process has {native} threads after the import (started outside Python's threading): forking it is not safe")
    import asyncio

    if asyncio.events._get_running_loop() is not None:
        raise Refusal("event-loop", "an asyncio event loop is running after the import: forking it is not safe")


# ---- one conversation -------------------------------------------------------


def _report_failed(fd: int, error: BaseException) -> None:
    """The supervisor's own `failed <ERRNO> <number> <message>` line."""
    import errno

    number = getattr(error, "errno", None) or errno.EIO
    name = errno.errorcode.get(number, "EIO")
    try:
        os.write(fd, f"failed {name} {number} {getattr(error, 'strerror', None) or error}\n".encode())
    except OSError:
        pass


def _place(targets: Dict[int, int]) -> None:
    """dup2s {target fd: source fd} safely, whatever the numbers overlap.

    Every source is first copied just above the highest target (the lowest
    free numbers there), so that no dup2 overwrites a source still to be
    placed; a fixed floor (64) failed every start under ``ulimit -n`` 64.
    """
    import fcntl

    floor = max(targets) + 1
    moved = {target: fcntl.fcntl(source, fcntl.F_DUPFD_CLOEXEC, floor) for target, source in targets.items()}
    for target, source in moved.items():
        os.dup2(source, target, inheritable=True)
    for source in moved.values():
        os.close(source)


def _reserve(numbers: range) -> List[int]:
    """Holds the free ones of these descriptor numbers on /dev/null
    (close-on-exec), so that what the app's import opens never sits where a
    backend's channel goes (a dup2 there in B would replace it)."""
    import fcntl

    taken: List[int] = []
    for fd in numbers:
        try:
            fcntl.fcntl(fd, fcntl.F_GETFD)
            continue  # open: the server's own (its channel), closed in each C
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        if null != fd:
            os.dup2(null, fd, inheritable=False)
            os.close(null)
        taken.append(fd)
    return taken


def _close_from(first: int) -> None:
    try:
        last = os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        last = 65536
    os.closerange(first, last)


class _Channel:
    """One request channel: the host's (the server's stdin), or a host's
    connection to the shared server's socket. Each keeps its own partial
    request and the descriptors that came with it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pending = b""
        self.fds: List[int] = []

    def close(self) -> None:
        for fd in self.fds:
            _close_quietly(fd)
        self.fds = []
        self.sock.close()


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class Server:
    def __init__(
        self,
        layout: Layout,
        reserved: List[int],
        channel: socket.socket,
        app: str,
        supervisor: str,
        main_module: ModuleType,
        wake: Tuple[int, int],
        app_signals: Tuple[_Handler, int],
        listener: Optional[socket.socket] = None,
        ready_line: bytes = b"",
    ) -> None:
        self.layout = layout
        # Numbers of the channel table the server holds (on /dev/null) so that
        # the app's import cannot take them; each C closes them.
        self.reserved = reserved
        self.main = _Channel(channel)
        self.channels = {channel.fileno(): self.main}
        self.app = app
        self.supervisor = supervisor
        self.main_module = main_module
        self.wake = wake
        # What the app's import installed and the server replaced: the
        # SIGCHLD handler and the wake-up fd, given back in every fork.
        self.app_signals = app_signals
        # The shared server's socket (`--listen`), and what each connection
        # is told first: the handshake, as the host was.
        self.listener = listener
        self.ready_line = ready_line
        # The conversations' supervisors (C): what a shutdown waits for. Any
        # other child (a process the app started at import) is reaped, never
        # waited for: its end is its supervisor's business (docs/prefork.md §5).
        self.conversations: Set[int] = set()

    # The server loop: requests until end of file on the host's channel,
    # then the conversations.
    def serve(self) -> int:
        poller = select.poll()
        poller.register(self.main.sock.fileno(), select.POLLIN)
        poller.register(self.wake[0], select.POLLIN)
        if self.listener is not None:
            poller.register(self.listener.fileno(), select.POLLIN)
        while True:
            try:
                events = poller.poll()
            except InterruptedError:
                continue
            for fd, _ in events:
                if fd == self.wake[0]:
                    try:
                        os.read(self.wake[0], 512)
                    except BlockingIOError:
                        pass
                    self._reap()
                elif self.listener is not None and fd == self.listener.fileno():
                    self._accept(poller)
                elif fd in self.channels:
                    channel = self.channels[fd]
                    if self._read(channel):
                        continue
                    if channel is self.main:
                        return self._drain()
                    poller.unregister(fd)
                    del self.channels[fd]
                    channel.close()

    def _accept(self, poller: select.poll) -> None:
        if self.listener is None:
            return
        try:
            sock, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            _log(f"cannot accept a connection: {exc}")
            return
        try:
            sock.setblocking(True)
            sock.sendall(self.ready_line)
        except OSError:
            sock.close()
            return
        self.channels[sock.fileno()] = _Channel(sock)
        poller.register(sock.fileno(), select.POLLIN)

    def _read(self, channel: _Channel) -> bool:
        """Reads what is there of the channel's current request; False at its end."""
        try:
            data, received, flags, _ = _recv_fds(channel.sock, _REQUEST_BYTES - len(channel.pending), len(self.layout.names))
        except InterruptedError:
            return True
        except OSError as exc:
            _log(f"request channel failed: {exc}")
            return False
        channel.fds.extend(received)
        if flags & _MSG_CTRUNC:
            # The kernel could not give the server every descriptor: the
            # request is refused below, and its conversation's control
            # socket ends without a report (the host reads this log line).
            _log(f"out of file descriptors (or more than {len(self.layout.names)} sent): a request came with {len(received)} descriptor(s)")
        if not data:
            return False
        channel.pending += data
        if len(channel.pending) == _REQUEST_BYTES:
            request, taken = channel.pending, channel.fds
            channel.pending, channel.fds = b"", []
            self._serve_request(request, taken)
        return True

    def _serve_request(self, request: bytes, fds: List[int]) -> None:
        import json

        try:
            message = json.loads(request.decode("ascii"))
            grace_ms = int(message["term_grace_ms"])
            count = message["fds"]
            if message.get("type") != "fork" or grace_ms < 0:
                raise ValueError("expected a fork request")
            # Never half-served: the count the host wrote is the count that
            # came, and names a whole prefix of the channel table.
            if not isinstance(count, int) or not self.layout.required <= count <= len(self.layout.names):
                raise ValueError(f"it says {count!r} descriptors, the channel table allows {self.layout.required} to {len(self.layout.names)}")
            if len(fds) != count:
                raise ValueError(f"it says {count} descriptors, {len(fds)} came")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            _log(f"bad request ({exc}); {len(fds)} descriptor(s) closed")
            for fd in fds:
                _close_quietly(fd)
            return
        try:
            self._fork(fds, grace_ms)
        finally:
            for fd in fds:
                _close_quietly(fd)

    def _fork(self, fds: List[int], grace_ms: int) -> None:
        _flush_stdio()  # a backend must not inherit output the server has buffered
        try:
            pid = os.fork()
        except OSError as exc:
            _report_failed(fds[self.layout.names.index("control")], exc)
            return
        if pid == 0:
            try:
                self._conversation(fds, grace_ms)
            finally:
                os._exit(127)
        self.conversations.add(pid)

    def _conversation(self, fds: List[int], grace_ms: int) -> None:
        """C: forks the backend, then becomes its supervisor. Whatever fails
        before the exec is reported on the control socket, as the supervisor
        reports a backend it could not start."""
        named = dict(zip(self.layout.names, fds))
        control = named["control"]
        try:
            self._undo_server_state()
            if _prctl is not None:
                # Before the backend exists, so that nothing it starts can be
                # orphaned past us; kept across the exec.
                _prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
            backend = os.fork()
        except Exception as exc:  # noqa: BLE001 - reported, whatever it was
            _report_failed(control, exc)
            os._exit(127)
        if backend == 0:
            try:
                _run_backend(self.main_module, self.app, self.layout, named)
            finally:
                os._exit(1)
        try:
            os.setpgid(backend, backend)
        except OSError:
            pass  # the backend did it first
        try:
            null = os.open(os.devnull, os.O_RDWR)
            _place({0: null, 1: null, 2: null, self.layout.control: control})
        except OSError as exc:
            _report_failed(control, exc)
            _kill_group(backend)
            os._exit(127)
        try:
            _close_from(self.layout.control + 1)
            os.execv(self.supervisor, [self.supervisor, "--adopt", str(backend), "--term-grace-ms", str(grace_ms)])
        except OSError as exc:
            _report_failed(self.layout.control, exc)
            _kill_group(backend)
            os._exit(127)

    def _undo_server_state(self) -> None:
        """In C: what the server changed goes back to what the app's import
        left (the backend inherits it, as a cold one has it); the server's
        own descriptors close."""
        sigchld, wakeup = self.app_signals
        signal.set_wakeup_fd(wakeup)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL if sigchld is None else sigchld)
        for channel in self.channels.values():
            channel.sock.close()
        if self.listener is not None:
            self.listener.close()
        os.close(self.wake[0])
        os.close(self.wake[1])
        for fd in self.reserved:
            _close_quietly(fd)

    def _reap(self) -> None:
        """Reaps every child that has ended: the conversations' supervisors,
        and whatever the app started at import."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.conversations.discard(pid)

    def _drain(self) -> int:
        """End of file on the host's channel: no more requests; exit once
        every conversation has ended. A process the app started at import
        is not waited for: the server's supervisor ends it once the server
        has exited."""
        if self.listener is not None:
            _unlink_quietly(self.listener.getsockname())
            self.listener.close()
        for channel in self.channels.values():
            channel.close()
        while self.conversations:
            try:
                pid, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            self.conversations.discard(pid)
        return 0


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except (OSError, TypeError):
        pass


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _recv_fds(channel: socket.socket, size: int, most: int) -> Tuple[bytes, List[int], int, Any]:
    flags = getattr(socket, "MSG_CMSG_CLOEXEC", 0)
    # Room for one more than the table allows: a request that brings too
    # many is seen as such (MSG_CTRUNC, or a count that differs), never
    # served with the extra ones dropped.
    data, fds, _, address = socket.recv_fds(channel, size, most + 1, flags)
    for fd in fds:
        os.set_inheritable(fd, False)
    return data, fds, _, address


# ---- B: the backend ---------------------------------------------------------


def _fresh_stdio() -> None:
    """sys.stdin/stdout/stderr as a fresh interpreter makes them on these fds.

    The server's objects were made for the server's descriptors (and the
    buffers are the server's); the settings (encoding, errors, -u) are the
    same interpreter's, so they are taken from them.
    """
    import io

    def make(fd: int, old: Any, name: str, write: bool) -> io.TextIOWrapper:
        write_through = getattr(old, "write_through", False)
        buffering = 0 if write and write_through else -1
        buffer: Any = io.open(fd, "wb" if write else "rb", buffering, closefd=False)
        raw = buffer if buffering == 0 else buffer.raw
        raw.name = name
        line_buffering = not write_through and (raw.isatty() or fd == 2)
        stream = io.TextIOWrapper(
            buffer,
            encoding=old.encoding,
            errors=old.errors,
            newline="\n",
            line_buffering=line_buffering,
            write_through=write_through,
        )
        # What a fresh interpreter's stdio says (read-only in the type stubs).
        setattr(stream, "mode", "w" if write else "r")  # noqa: B010
        return stream

    for name, fd, write in (("stdin", 0, False), ("stdout", 1, True), ("stderr", 2, True)):
        stream = make(fd, getattr(sys, f"__{name}__"), f"<{name}>", write)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run_backend(main_module: ModuleType, app: str, layout: Layout, named: Dict[str, int]) -> None:
    """B: a process group of its own, the conversation's stdio (and its host
    channel, when the start declared one), then the bridge's `main`. Never returns."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    placed = {layout.fds[name]: named[name] for name in ("stdin", "stdout", "stderr", "host") if name in named}
    try:
        _place(placed)
    except OSError as exc:
        try:
            os.write(named["stderr"], f"prefork-server: cannot give the backend its stdio: {exc}\n".encode())
        except OSError:
            pass
        os._exit(1)
    # The variable names the channel only when this start has one (a
    # server's environment is every conversation's).
    if "host" in named:
        os.environ[layout.host_env] = str(layout.host)
    else:
        os.environ.pop(layout.host_env, None)
    # Only the server's descriptors go: what the app's import opened stays
    # open, as in a cold backend (its C parent closed the channel).
    for fd in named.values():
        if fd not in placed:  # a received number is never a target; if it were, it now holds its channel
            os.close(fd)
    import gc

    gc.enable()
    _fresh_stdio()
    code: object = 0
    interrupted = False
    try:
        code = main_module.main(["--app", app])
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:  # noqa: BLE001 - as the interpreter reports an uncaught exception
        import traceback

        traceback.print_exc()
        code = 1
    os._exit(_finalize(code, interrupted))


def _finalize(code: object, interrupted: bool) -> int:
    """What the interpreter does on its way out: threads, atexit, stdio; the exit status."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        try:
            print(code, file=sys.stderr)
        except (OSError, ValueError):
            pass
        code = 1
    try:
        import threading

        getattr(threading, "_shutdown")()
    except BaseException:  # noqa: BLE001 - as the interpreter ignores it
        pass
    import atexit

    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        code = 120
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if interrupted:
        # As the interpreter ends on an uncaught KeyboardInterrupt: by SIGINT.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code & 0xFF


# ---- main -------------------------------------------------------------------


def _main(argv: List[str]) -> int:
    if len(argv) not in (5, 6) or argv[1] != str(_PROTOCOL):
        _log(f"usage: -c <source> {_PROTOCOL} <channel table> <module:factory> <supervisor> [<socket path>] (got {argv[1:]!r})")
        return 2
    try:
        layout = Layout(argv[2])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        _log(f"usage: the channel table is not one this server can use ({exc})")
        return 2
    app, supervisor = argv[3], argv[4]
    listen = argv[5] if len(argv) == 6 else None
    # The channel leaves fd 0, which a backend gets as its stdin.
    channel = socket.socket(fileno=os.dup(0))
    channel.setblocking(True)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    reserved = _reserve(range(3, max(layout.fds.values()) + 1))
    import gc

    # Fewer holes and no collector touching what the backends share: the
    # import's objects are frozen before the first fork (gc docs).
    gc.disable()
    try:
        main_module = _as_if_run_with_m(app)
        _load_app(main_module, app)
        _prepare_forks(app)
        gc.freeze()
        _check_fork_safety()
    except Refusal as refusal:
        # What the import wrote (its traceback) is in the log before the
        # host reads the refusal (StartError::log_tail).
        _flush_stdio()
        channel.sendall(_line({"type": "refused", "code": refusal.code, "message": refusal.message}))
        return 3
    # SIGCHLD wakes the loop, which reaps the conversations' supervisors.
    # What the app's import installed in their place is given back in
    # every fork (`Server._undo_server_state`).
    wake = os.pipe()
    for fd in wake:
        os.set_blocking(fd, False)
    app_signals = (signal.getsignal(signal.SIGCHLD), signal.set_wakeup_fd(wake[1]))
    signal.signal(signal.SIGCHLD, lambda *_: None)
    listener = None
    if listen is not None:
        # A shared server (docs/prefork.md §7): other hosts connect here.
        # The path is in a directory only this user can enter, made by the host.
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(listen)
            listener.listen(64)
        except OSError as exc:
            _log(f"cannot listen on {listen}: {exc}")
            return 4
        listener.setblocking(False)
    import platform

    try:
        from importlib.metadata import version

        agentlane = version("agentlane")
    except Exception:  # noqa: BLE001 - only informative
        agentlane = None
    ready = {
        "type": "ready",
        "protocol": _PROTOCOL,
        "pid": os.getpid(),
        "python": platform.python_version(),
        "agentlane": agentlane,
    }
    # The import's output is in the log before the handshake: the host
    # gives it to every conversation (`PreforkServer::import_output`).
    _flush_stdio()
    ready_line = _line(ready)
    channel.sendall(ready_line)
    return Server(layout, reserved, channel, app, supervisor, main_module, wake, app_signals, listener, ready_line).serve()


sys.exit(_main(sys.argv))
