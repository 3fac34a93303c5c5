"""The example overlay's values as `RenderSettings`: `render` with these must print what
``kustomize build deploy/k8s/overlays/example`` prints (its header comment has the flags)."""

from __future__ import annotations

from sluicegate.deploy import RenderSettings

EXAMPLE = RenderSettings(
    pipeline="sluicegate.demos.wordcount:demo_graph",
    workers=3,
    slots=2,
    image="registry.example.com/sluicegate:0.1.0",
    kafka_bootstrap="kafka-bootstrap.kafka.svc:9093",
    storage_url="s3://example-sluicegate/wordcount",
    namespace="sluicegate",
    region="eu-west-1",
    kafka_security_protocol="SASL_SSL",
    kafka_sasl_mechanism="SCRAM-SHA-512",
    kafka_tls_ca=True,
    monitoring=True,
)
