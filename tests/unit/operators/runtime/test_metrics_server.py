"""MetricsServer: serves its registry over real HTTP on a free port, stops cleanly, and says
which setting to change when the port is taken."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from operators.exceptions import ConfigError
from operators.runtime.metrics_server import MetricsServer


def test_serves_the_registry_on_any_free_port_and_stops() -> None:
    registry = CollectorRegistry()
    Counter("sluicegate_test_total", "A test counter", registry=registry).inc(3)
    server = MetricsServer.start("127.0.0.1", 0, registry)
    try:
        assert server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(server.url, timeout=10) as response:
            text = response.read().decode()
        assert "sluicegate_test_total 3.0" in text
    finally:
        server.stop()
    with socket.socket() as probe:  # nothing listens any more
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", server.port))


def test_a_busy_port_is_a_config_error() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match=f"127.0.0.1:{port}.*--metrics-port"):
            MetricsServer.start("127.0.0.1", port, CollectorRegistry())
