"""JAXJob (kubeflow.org/v1, JAX): the training-operator family recogniser with its names.

Names only; the behaviour is in trainingoperator.py. Pure: no I/O.
"""

from __future__ import annotations

from .trainingoperator import TrainingOperatorRecognizer

RECOGNIZER = TrainingOperatorRecognizer(
    name="jaxjob", kind="JAXJob", plural="jaxjobs", replica_specs="jaxReplicaSpecs"
)
