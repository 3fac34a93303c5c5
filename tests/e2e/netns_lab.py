"""Hosts for a multi-host test: Linux network namespaces the test makes, on a private bridge.

`NetnsLab` makes one namespace holding a bridge and one namespace per host, each joined to the
bridge by a veth pair (``eth0`` in the host, its peer enslaved to the bridge), addressed
``10.77.0.<i>/24``. Nothing is added to the namespace the tests run in: the lab is reached only
by running programs inside it (`NetnsLab.command`). `NetnsLab.cut` sets a host's bridge port
down, as a pulled cable would: its processes keep running and keep their sockets, but no packet
goes in or out until `NetnsLab.heal`.

Making namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2; `unavailable`
says why they cannot be made here, so that a test can skip with that reason.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

__all__ = ["Host", "NetnsLab", "unavailable"]

_SUBNET = "10.77.0"


@dataclass(frozen=True, slots=True)
class Host:
    """One host of the lab: its namespace, its address, its port on the bridge."""

    name: str
    namespace: str
    address: str
    bridge_port: str


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def unavailable() -> str | None:
    """None when namespaces, a bridge and veth pairs can be made here; else why not."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    probe = f"sgprobe{uuid.uuid4().hex[:6]}"
    try:
        _ip("netns", "add", probe)
        try:
            _ip("-n", probe, "link", "add", "br0", "type", "bridge")
            _ip("-n", probe, "link", "add", "a0", "type", "veth", "peer", "name", "b0")
        finally:
            _ip("netns", "del", probe)
    except OSError as exc:
        return f"cannot make network namespaces here (root and CAP_NET_ADMIN needed): {exc}"
    return None


class NetnsLab:
    """Hosts ``names`` (addresses ``10.77.0.1``, ``.2``, ... in that order) on one bridge;
    everything is deleted on exit."""

    def __init__(self, names: Sequence[str]) -> None:
        lab = uuid.uuid4().hex[:6]
        self._bridge_namespace = f"sg{lab}-bridge"
        self.hosts = {
            name: Host(
                name=name,
                namespace=f"sg{lab}-{name}",
                address=f"{_SUBNET}.{i}",
                bridge_port=f"p{lab}{i}",
            )
            for i, name in enumerate(names, start=1)
        }
        self._made: list[str] = []

    def __enter__(self) -> NetnsLab:
        try:
            self._make()
        except BaseException:
            self._delete()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._delete()

    def _make(self) -> None:
        bridge = self._bridge_namespace
        _ip("netns", "add", bridge)
        self._made.append(bridge)
        _ip("-n", bridge, "link", "add", "br0", "type", "bridge")
        _ip("-n", bridge, "link", "set", "br0", "up")
        for host in self.hosts.values():
            _ip("netns", "add", host.namespace)
            self._made.append(host.namespace)
            _ip("-n", host.namespace, "link", "set", "lo", "up")
            _ip("-n", bridge, "link", "add", host.bridge_port, "type", "veth",
                "peer", "name", "eth0", "netns", host.namespace)  # fmt: skip
            _ip("-n", bridge, "link", "set", host.bridge_port, "master", "br0", "up")
            _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
            _ip("-n", host.namespace, "link", "set", "eth0", "up")

    def _delete(self) -> None:
        for namespace in reversed(self._made):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
        self._made.clear()

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``host``'s namespace (same files, environment and user)."""
        return ["ip", "netns", "exec", self.hosts[host].namespace, *argv]

    def cut(self, host: str) -> None:
        """Take ``host`` off the network: its bridge port goes down."""
        _ip("-n", self._bridge_namespace, "link", "set", self.hosts[host].bridge_port, "down")

    def heal(self, host: str) -> None:
        """Put ``host`` back on the network."""
        _ip("-n", self._bridge_namespace, "link", "set", self.hosts[host].bridge_port, "up")
