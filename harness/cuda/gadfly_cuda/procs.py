"""Process hygiene for the evaluator (Linux /proc, standard library only).

The evaluator makes itself a child subreaper, so any process the candidate
starts, even one that double-forks or calls setsid, stays its descendant and
is found and killed before the results are written.
"""
from __future__ import annotations

import ctypes
import os
import signal
import time

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _ppid_map() -> dict[int, int]:
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may contain spaces and parentheses.
        try:
            rest = data[data.rindex(b")") + 2:].split()
            out[int(name)] = int(rest[1])
        except (ValueError, IndexError):
            continue
    return out


def descendants(pid: int | None = None) -> list[int]:
    """All live descendants of ``pid`` (default: this process), zombies included."""
    root = os.getpid() if pid is None else pid
    ppid = _ppid_map()
    children: dict[int, list[int]] = {}
    for p, pp in ppid.items():
        children.setdefault(pp, []).append(p)
    out, stack = [], [root]
    while stack:
        for c in children.get(stack.pop(), []):
            out.append(c)
            stack.append(c)
    return out


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2:].split()[0] == b"Z"
    except (OSError, ValueError, IndexError):
        return True


def kill_descendants(exclude: tuple[int, ...] = (), rounds: int = 5) -> list[int]:
    """SIGKILLs every descendant except ``exclude``, reaps them; returns the pids killed."""
    killed = []
    for _ in range(rounds):
        pids = [p for p in descendants() if p not in exclude and not is_zombie(p)]
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
                killed.append(p)
            except OSError:
                pass
        time.sleep(0.02)
        reap()
    reap()
    return killed


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def thread_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return -1


def mapped_files(pid: int) -> set[str]:
    out = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    out.add(parts[5].strip())
    except OSError:
        pass
    return out


def banned_mappings(pid: int, patterns) -> list[str]:
    """Mapped files whose base name contains a banned pattern (case-insensitive)."""
    hits = []
    for path in sorted(mapped_files(pid)):
        base = os.path.basename(path).lower()
        if any(p.lower() in base for p in patterns):
            hits.append(path)
    return hits
