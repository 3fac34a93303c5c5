"""MetricsServer: serves its registry over real HTTP on a free port, stops cleanly, and says
which setting to change when the port is taken."""

from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from sluicegate.operators.exceptions import ConfigError
from sluicegate.operators.runtime.metrics_server import MetricsServer


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


@pytest.mark.parametrize(
    "accept",
    [
        "application/openmetrics-text; version=banana",
        "text/plain; version=banana",
        "application/openmetrics-text; version=banana, text/plain;q=0.5",
    ],
)
def test_an_unparsable_accept_version_answers_200_in_the_prometheus_text_format(
    accept: str,
) -> None:
    registry = CollectorRegistry()
    Counter("sluicegate_test_total", "A test counter", registry=registry).inc(3)
    server = MetricsServer.start("127.0.0.1", 0, registry)
    try:
        request = urllib.request.Request(server.url, headers={"Accept": accept})
        with urllib.request.urlopen(request, timeout=10) as response:
            status, content_type = response.status, response.headers["Content-Type"]
            text = response.read().decode()
        openmetrics = urllib.request.Request(
            server.url, headers={"Accept": "application/openmetrics-text"}
        )
        with urllib.request.urlopen(openmetrics, timeout=10) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text;")
    finally:
        server.stop()
    assert status == 200
    assert content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert "sluicegate_test_total 3.0" in text
