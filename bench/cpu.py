"""CPU seconds of other processes, read from ``/proc``: the broker's, and child processes'.

The broker's CPU is part of what durability costs us (every journal append, every
transaction marker, every read of a topic), as the fsync SQLite does is part of LangGraph's,
so the benchmarks count it beside the process's own. `broker_pid` finds the process that
listens on the bootstrap address's port (``/proc/net/tcp`` and ``tcp6`` give the socket's
inode in state LISTEN; the process holding that inode among its file descriptors is the
broker), which works for the development broker a benchmark starts and for one
``bench.run_all`` started, as long as it runs on this machine under the same user.
`BrokerCpu` reads its ``utime + stime`` (``/proc/<pid>/stat``) before and after a timed span;
`CpuSpan` adds this process's CPU (and that of child processes, when the work runs there).
Linux only; anything unreadable gives ``None``, and the tables then show ``-``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["BrokerCpu", "CpuSpan", "broker_pid", "process_cpu", "tree_cpu"]

_LISTEN = "0A"
_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from field 3 of proc(5) on (None: gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    return stat[stat.rindex(")") + 2 :].split()


def process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (its threads included)."""
    fields = _stat(pid)
    if fields is None:
        return None
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / _TICKS


def tree_cpu(roots: Iterable[int]) -> float:
    """CPU seconds so far of processes ``roots`` and every live descendant of theirs (a peer
    started through a launcher does its work in a child of the process started)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        if (fields := _stat(pid)) is not None:
            children.setdefault(int(fields[1]), []).append(pid)  # field 4: the parent
    tree, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in tree:
                tree.add(child)
                todo.append(child)
    return sum(cpu for pid in tree if (cpu := process_cpu(pid)) is not None)


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == _LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def _pids() -> list[int]:
    with os.scandir("/proc") as entries:
        return [int(entry.name) for entry in entries if entry.name.isdigit()]


def broker_pid(bootstrap: str) -> int | None:
    """The pid of the process listening on the first bootstrap address's port, if local."""
    host_port = bootstrap.split(",")[0].rsplit(":", 1)
    if len(host_port) != 2 or not host_port[1].isdigit():
        return None
    port = int(host_port[1])
    sockets = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not sockets:
        return None
    for pid in _pids():
        try:
            with os.scandir(f"/proc/{pid}/fd") as fds:
                if any(os.readlink(fd.path) in sockets for fd in fds):
                    return pid
        except OSError:  # gone, or not ours
            continue
    return None


class BrokerCpu:
    """The broker's CPU seconds over a span: `start`, then `seconds`; ``None`` if unknown."""

    def __init__(self, bootstrap: str) -> None:
        self.pid = broker_pid(bootstrap)
        self._started: float | None = None

    def start(self) -> None:
        self._started = None if self.pid is None else process_cpu(self.pid)

    def seconds(self) -> float | None:
        """CPU seconds the broker used since `start`."""
        if self.pid is None or self._started is None:
            return None
        now = process_cpu(self.pid)
        return None if now is None else now - self._started


class CpuSpan:
    """CPU seconds over a span: this process's plus ``pids``' (children doing the work), and
    the broker's. `start`, then `stop` gives ``(ours, broker)``; the broker's is ``None`` when
    it is not a local process."""

    def __init__(self, bootstrap: str, pids: Iterable[int] = ()) -> None:
        self._broker = BrokerCpu(bootstrap)
        self._pids = list(pids)
        self._started = 0.0

    def _ours(self) -> float:
        children = (process_cpu(pid) for pid in self._pids)
        return time.process_time() + sum(c for c in children if c is not None)

    def start(self) -> None:
        self._broker.start()
        self._started = self._ours()

    def stop(self) -> tuple[float, float | None]:
        return self._ours() - self._started, self._broker.seconds()
