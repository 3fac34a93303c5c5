"""Deploying a pipeline to Kubernetes: the manifests of ``deploy/k8s``, rendered for a pipeline.

`render` reads the kustomize base (and the monitoring component) and applies what an overlay
would: namespace, image, the ``sluicegate-config`` values, the worker count and their slots.
``sluicegate deploy render`` prints the result for ``kubectl apply -f -``.
"""

from sluicegate.deploy.render import RenderSettings, render, slots_for, to_yaml

__all__ = ["RenderSettings", "render", "slots_for", "to_yaml"]
