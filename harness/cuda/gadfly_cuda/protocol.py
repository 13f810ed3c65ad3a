"""Length-prefixed JSON messages over pipe file descriptors (standard library only).

The runner gets its own pair of pipes (not stdin/stdout, which the candidate
may print to).  Every request carries a nonce that the answer must echo.
"""
from __future__ import annotations

import json
import os
import select
import struct
import time

MAX_MESSAGE = 1 << 22


class ProtocolError(RuntimeError):
    pass


def send(fd: int, obj) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode()
    if len(data) > MAX_MESSAGE:
        raise ProtocolError("message too large")
    buf = struct.pack("<I", len(data)) + data
    view = memoryview(buf)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out waiting for the runner")
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                raise TimeoutError("timed out waiting for the runner")
        chunk = os.read(fd, n - got)
        if not chunk:
            raise EOFError("the runner closed its pipe (it exited or crashed)")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv(fd: int, timeout: float | None = None):
    deadline = None if timeout is None else time.monotonic() + timeout
    (n,) = struct.unpack("<I", _read_exact(fd, 4, deadline))
    if n > MAX_MESSAGE:
        raise ProtocolError(f"message of {n} bytes is too large")
    try:
        return json.loads(_read_exact(fd, n, deadline))
    except ValueError as e:
        raise ProtocolError(f"bad message: {e}") from None
