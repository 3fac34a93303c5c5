"""The manifests of ``deploy/k8s`` with an overlay's values applied, as `render` builds them.

`render` performs, on the base's objects (plus the monitoring component's with
``monitoring``), what ``deploy/k8s/overlays/example`` does with kustomize:

1. ``namespace`` on every object;
2. the image of every ``sluicegate`` container;
3. the ``sluicegate-config`` values: pipeline, Kafka bootstrap and security protocol,
   checkpoint storage, S3 region and endpoint;
4. the workers StatefulSet's replicas and its workers' ``--slots`` (and
   ``--state-changelog``, with ``state_changelog``).

The result is what ``kustomize build`` of such an overlay prints, minus the Secret, which a
cluster gets from its secret store (docs/deploy.md).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from sluicegate.deploy.manifests import BASE_FILES, MONITORING_FILES, Manifest, load
from sluicegate.operators.exceptions import ConfigError

__all__ = [
    "CONFIG_NAME",
    "KAFKA_CA_FILE",
    "WORKERS_NAME",
    "RenderSettings",
    "render",
    "slots_for",
    "to_yaml",
]

CONFIG_NAME = "sluicegate-config"
WORKERS_NAME = "sluicegate-worker"
_IMAGE_NAME = "sluicegate"
KAFKA_CA_FILE = "/etc/sluicegate/kafka-tls/ca.crt"
"""Where the pods mount ``ca.crt`` of the Secret ``sluicegate-kafka-tls``."""
_SLOTS_FLAG = "--slots="


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderSettings:
    """What an overlay sets; every field is a flag of ``sluicegate deploy render``."""

    pipeline: str
    """``module:attribute`` importable in the image."""
    workers: int
    slots: int
    """Subtasks each worker may host (see `slots_for`)."""
    image: str
    """The sluicegate image with a pinned tag or digest, e.g. ``registry/sluicegate:0.1.0``."""
    kafka_bootstrap: str
    storage_url: str
    """Checkpoint storage shared by every pod: ``s3://bucket/prefix``."""
    namespace: str = "sluicegate"
    region: str = "us-east-1"
    s3_endpoint: str | None = None
    """An S3-compatible server (MinIO, Ceph...); None: AWS S3."""
    kafka_security_protocol: str = "PLAINTEXT"
    """``SLUICEGATE_KAFKA_SECURITY_PROTOCOL``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
    kafka_sasl_mechanism: str | None = None
    """``SLUICEGATE_KAFKA_SASL_MECHANISM``, with a SASL protocol only (the user and password
    come from the Secret)."""
    kafka_tls_ca: bool = False
    """Trust the CA in the Secret ``sluicegate-kafka-tls`` (``SLUICEGATE_KAFKA_SSL_CAFILE``)
    instead of the system's."""
    monitoring: bool = False
    """Add the PodMonitor and PrometheusRule (needs the Prometheus Operator's CRDs)."""
    state_changelog: bool = False
    """Workers checkpoint their state as a changelog (``worker --state-changelog``)."""

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ConfigError("--workers", f"{self.workers}: at least one worker is needed")
        if self.slots < 1:
            raise ConfigError("--slots", f"{self.slots}: a worker needs at least one slot")
        if not self.storage_url.startswith("s3://"):
            raise ConfigError(
                "--storage-url",
                f"{self.storage_url!r}: pods on different nodes share checkpoints only through "
                "S3 or an S3-compatible store (s3://bucket/prefix)",
            )
        sasl = self.kafka_security_protocol.startswith("SASL_")
        if sasl != (self.kafka_sasl_mechanism is not None):
            raise ConfigError(
                "--kafka-sasl-mechanism",
                f"{self.kafka_sasl_mechanism} with {self.kafka_security_protocol}: a SASL "
                "protocol needs a mechanism, and a mechanism needs a SASL protocol",
            )
        if self.kafka_tls_ca and self.kafka_security_protocol not in {"SSL", "SASL_SSL"}:
            raise ConfigError("--kafka-tls-ca", f"{self.kafka_security_protocol} has no TLS")
        if ":" not in self.image.rsplit("/", 1)[-1] and "@" not in self.image:
            raise ConfigError("--image", f"{self.image!r}: pin a tag or a digest")


def slots_for(subtasks: int, workers: int) -> int:
    """Slots per worker so that every subtask fits with one worker down.

    A worker lost (crashed, drained, replaced by a rolling update: the PodDisruptionBudget
    allows one at a time) costs a global recovery onto the others, which must then host all
    ``subtasks``. With a single worker there is nothing to spare.
    """
    if subtasks < 1 or workers < 1:
        raise ConfigError("--workers", f"{workers} workers for {subtasks} subtasks")
    return math.ceil(subtasks / max(workers - 1, 1))


def render(settings: RenderSettings) -> list[Manifest]:
    """The objects to apply, in the base's order; steps in the module docstring."""
    objects = copy.deepcopy(load("base", BASE_FILES))
    if settings.monitoring:
        objects += copy.deepcopy(load("components/monitoring", MONITORING_FILES))
    for obj in objects:
        obj["metadata"]["namespace"] = settings.namespace
        for container in _containers(obj):
            if container["image"].split(":", 1)[0] == _IMAGE_NAME:
                container["image"] = settings.image
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == CONFIG_NAME:
            obj["data"].update(_config(settings))
        if obj["kind"] == "StatefulSet" and obj["metadata"]["name"] == WORKERS_NAME:
            obj["spec"]["replicas"] = settings.workers
            for container in _containers(obj):
                container["args"] = [
                    f"{_SLOTS_FLAG}{settings.slots}" if arg.startswith(_SLOTS_FLAG) else arg
                    for arg in container["args"]
                ] + (["--state-changelog"] if settings.state_changelog else [])
    return objects


def to_yaml(objects: list[Manifest]) -> str:
    """A multi-document YAML stream for ``kubectl apply -f -``."""
    return yaml.safe_dump_all(objects, sort_keys=False, width=100)


def _config(settings: RenderSettings) -> dict[str, str]:
    values = {
        "SLUICEGATE_PIPELINE": settings.pipeline,
        "SLUICEGATE_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "SLUICEGATE_STORAGE_URL": settings.storage_url,
        "AWS_REGION": settings.region,
        "SLUICEGATE_KAFKA_SECURITY_PROTOCOL": settings.kafka_security_protocol,
    }
    if settings.kafka_sasl_mechanism is not None:
        values["SLUICEGATE_KAFKA_SASL_MECHANISM"] = settings.kafka_sasl_mechanism
    if settings.kafka_tls_ca:
        values["SLUICEGATE_KAFKA_SSL_CAFILE"] = KAFKA_CA_FILE
    if settings.s3_endpoint is not None:
        values["AWS_ENDPOINT_URL"] = settings.s3_endpoint
        if settings.s3_endpoint.startswith("http://"):
            values["AWS_ALLOW_HTTP"] = "true"
    return values


def _containers(obj: Manifest) -> Iterator[dict[str, Any]]:
    template = obj.get("spec", {}).get("template")
    if isinstance(template, dict):
        yield from template["spec"].get("containers", [])
