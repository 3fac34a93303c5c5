"""``sluicegate deploy render``: the Kubernetes manifests for a pipeline, on stdout.

    sluicegate deploy render --pipeline my.flows:graph --workers 3 \\
        --image registry/sluicegate:0.1.0 --kafka-bootstrap kafka:9092 \\
        --storage-url s3://bucket/prefix | kubectl apply -f -

The upgrade runbook's steps (``deploy/k8s/upgrade.sh``, docs/deploy.md) read the coordinator's
Deployment (``kubectl get deploy sluicegate-coordinator -o json``) on stdin:

* ``sluicegate deploy savepoint-pod --savepoint NAME``: the Pod that takes a stop-with-savepoint
  with the running (old) version, once;
* ``sluicegate deploy restore-patch --savepoint NAME --image IMAGE``: the JSON patch that starts
  the new image from that savepoint.

The pipeline is imported here to count its subtasks: each worker gets enough ``--slots`` for
the others to host every subtask while one is down (`sluicegate.deploy.slots_for`), unless
``--slots`` says otherwise; too few slots in all is refused. The Secret ``sluicegate-secrets``
is not rendered (docs/deploy.md says what it holds).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from sluicegate.operators.exceptions import ConfigError

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``deploy render`` to a parser's subcommands (``run`` returns the exit code)."""
    deploy = subparsers.add_parser("deploy", help="deploy a pipeline to a cluster")
    commands = deploy.add_subparsers(required=True, metavar="WHAT")
    render = commands.add_parser(
        "render", help="print the Kubernetes manifests of a pipeline (kubectl apply -f -)"
    )
    render.add_argument("--pipeline", required=True, help="module:attribute, as for `worker`")
    render.add_argument("--workers", type=int, required=True, help="worker pods")
    render.add_argument(
        "--slots",
        type=int,
        default=None,
        help="subtasks per worker (default: enough that the others host all with one down)",
    )
    render.add_argument("--image", required=True, help="the image, with a pinned tag")
    render.add_argument("--kafka-bootstrap", required=True, metavar="HOST:PORT")
    render.add_argument("--storage-url", required=True, help="checkpoints: s3://bucket/prefix")
    render.add_argument("--namespace", default="sluicegate")
    render.add_argument("--region", default="us-east-1", help="S3 region")
    render.add_argument("--s3-endpoint", default=None, help="an S3-compatible server's URL")
    render.add_argument(
        "--kafka-security-protocol",
        default="PLAINTEXT",
        choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
        help="PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL (credentials: the Secret)",
    )
    render.add_argument(
        "--kafka-sasl-mechanism",
        default=None,
        choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"],
        help="with a SASL protocol",
    )
    render.add_argument(
        "--kafka-tls-ca",
        action="store_true",
        help="trust the CA in the Secret sluicegate-kafka-tls (ca.crt), not the system's",
    )
    render.add_argument(
        "--monitoring",
        action="store_true",
        help="add the PodMonitor and PrometheusRule (Prometheus Operator)",
    )
    render.add_argument(
        "--state-changelog",
        action="store_true",
        help="workers checkpoint state as a changelog (worker --state-changelog)",
    )
    render.add_argument("--output", "-o", type=Path, default=None, help="write here, not stdout")
    render.set_defaults(run=_render)

    pod = commands.add_parser(
        "savepoint-pod",
        help="a Pod taking stop-with-savepoint, from the coordinator Deployment on stdin",
    )
    pod.add_argument("--savepoint", required=True, help="the savepoint's name")
    pod.set_defaults(run=_savepoint_pod)
    patch = commands.add_parser(
        "restore-patch",
        help="a JSON patch of the coordinator Deployment on stdin: new image, from a savepoint",
    )
    patch.add_argument("--savepoint", required=True, help="the savepoint's name")
    patch.add_argument("--image", required=True, help="the new image, with a pinned tag")
    patch.set_defaults(run=_restore_patch)


def _render(args: argparse.Namespace) -> int:
    from sluicegate.cli.loader import load_graph
    from sluicegate.deploy import RenderSettings, render, slots_for, to_yaml

    subtasks = len(load_graph(args.pipeline).subtasks())
    slots = args.slots if args.slots is not None else slots_for(subtasks, args.workers)
    if slots * args.workers < subtasks:
        raise ConfigError(
            "--slots",
            f"{args.workers} workers x {slots} slots cannot host the pipeline's {subtasks} "
            "subtasks; add workers or slots",
        )
    settings = RenderSettings(
        pipeline=args.pipeline,
        workers=args.workers,
        slots=slots,
        image=args.image,
        kafka_bootstrap=args.kafka_bootstrap,
        storage_url=args.storage_url,
        namespace=args.namespace,
        region=args.region,
        s3_endpoint=args.s3_endpoint,
        kafka_security_protocol=args.kafka_security_protocol,
        kafka_sasl_mechanism=args.kafka_sasl_mechanism,
        kafka_tls_ca=args.kafka_tls_ca,
        monitoring=args.monitoring,
        state_changelog=args.state_changelog,
    )
    text = to_yaml(render(settings))
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    if slots * (args.workers - 1) < subtasks:
        print(
            f"sluicegate: note: with one of {args.workers} workers down, {slots} slots each "
            f"cannot host all {subtasks} subtasks; the job waits for the worker to return",
            file=sys.stderr,
        )
    return 0


def _read_deployment() -> dict[str, Any]:
    import yaml

    deployment = yaml.safe_load(sys.stdin.read())  # JSON is YAML too
    if not isinstance(deployment, dict) or deployment.get("kind") != "Deployment":
        raise ConfigError(
            "stdin", "expected the coordinator's Deployment (kubectl get deploy ... -o json)"
        )
    return deployment


def _savepoint_pod(args: argparse.Namespace) -> int:
    from sluicegate.deploy import to_yaml
    from sluicegate.deploy.upgrade import savepoint_pod

    sys.stdout.write(to_yaml([savepoint_pod(_read_deployment(), savepoint=args.savepoint)]))
    return 0


def _restore_patch(args: argparse.Namespace) -> int:
    from sluicegate.deploy.upgrade import restore_patch

    patch = restore_patch(_read_deployment(), image=args.image, savepoint=args.savepoint)
    print(json.dumps(patch))
    return 0
