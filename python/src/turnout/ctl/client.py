"""The one client of turnoutd's control socket (JSON-RPC 2.0 over a unix
socket, one JSON object per line: docs/turnoutd.md), used by ``turnout
ctl``, the turnoutd SUT adapter (sut/turnoutd.py) and the test harness
(python/tests/turnoutd/harness.py)."""

from __future__ import annotations

import json
import socket
from typing import Any

__all__ = ["DEFAULT_SOCKET", "SOCKET_ENV", "CtlClient", "CtlConnectionError", "CtlError", "call",
           "request_line", "result_of"]

#: Where turnoutd listens unless told otherwise (``[switch] control_socket``).
DEFAULT_SOCKET = "/run/turnout/turnoutd.sock"
#: Environment variable overriding the default socket.
SOCKET_ENV = "TURNOUT_CTL_SOCKET"


class CtlError(Exception):
    """The daemon answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message


class CtlConnectionError(ConnectionError):
    """The daemon could not be reached, hung up or answered something that
    is not JSON-RPC (an OSError: callers that catch the socket's errors
    catch it too)."""


class CtlClient:
    """One connection to turnoutd's control socket; requests are sent one at a time."""

    def __init__(self, path: str, timeout_s: float = 10.0) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._buf = b""
        self._next_id = 1

    def __enter__(self) -> CtlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection (reopened by the next call)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._buf = b""

    def _connect(self) -> socket.socket:
        if self._sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self.timeout_s)
            try:
                s.connect(self.path)
            except OSError as e:
                s.close()
                reason = e.strerror or str(e)
                raise CtlConnectionError(
                    f"cannot connect to turnoutd at {self.path}: {reason.lower()} "
                    f"(is turnoutd running? use --socket or ${SOCKET_ENV})"
                ) from e
            self._sock = s
        return self._sock

    def call(self, method: str, params: Any = None, timeout_s: float | None = None) -> Any:
        """Calls ``method``; returns its result or raises :class:`CtlError`.
        ``timeout_s``: for this call (default: the client's)."""
        s = self._connect()
        s.settimeout(self.timeout_s if timeout_s is None else timeout_s)
        rid = self._next_id
        self._next_id += 1
        try:
            s.sendall(request_line(method, params, rid))
            while b"\n" not in self._buf:
                chunk = s.recv(65536)
                if not chunk:
                    raise CtlConnectionError("turnoutd closed the connection")
                self._buf += chunk
        except CtlConnectionError:
            self.close()
            raise
        except OSError as e:
            self.close()
            raise CtlConnectionError(f"talking to turnoutd at {self.path}: {e}") from e
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return result_of(line, rid)
        except CtlConnectionError:
            self.close()
            raise


def request_line(method: str, params: Any, rid: int) -> bytes:
    """One JSON-RPC 2.0 request as turnoutd reads it: a JSON object and a newline."""
    req: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        req["params"] = params
    return json.dumps(req).encode() + b"\n"


def result_of(line: bytes | str, rid: int) -> Any:
    """The result of turnoutd's answer ``line`` to request ``rid``; CtlError
    for an error answer, CtlConnectionError for anything else."""
    try:
        resp = json.loads(line)
    except ValueError as e:
        raise CtlConnectionError(
            f"turnoutd sent something that is not json: {line[:80]!r}"
        ) from e
    if not isinstance(resp, dict):
        raise CtlConnectionError(f"turnoutd sent something that is not json-rpc: {line[:80]!r}")
    if "error" in resp:
        err = resp["error"]
        raise CtlError(int(err.get("code", 0)), str(err.get("message", "")))
    if resp.get("id") != rid:
        raise CtlConnectionError(
            f"response id {resp.get('id')!r} does not match request id {rid}"
        )
    return resp.get("result")


def call(path: str, method: str, params: Any = None, timeout_s: float = 10.0) -> Any:
    """One call on a connection of its own (closed afterwards)."""
    with CtlClient(path, timeout_s) as c:
        return c.call(method, params)
