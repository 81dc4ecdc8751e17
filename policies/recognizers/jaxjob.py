"""JAXJob (kubeflow.org/v1, JAX): the training-operator family recogniser with its names."""

from __future__ import annotations

from .trainingoperator import TrainingOperatorRecognizer

RECOGNIZER = TrainingOperatorRecognizer(
    name="jaxjob", kind="JAXJob", plural="jaxjobs", replica_specs="jaxReplicaSpecs"
)
