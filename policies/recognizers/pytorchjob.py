"""PyTorchJob (kubeflow.org/v1, PyTorch): the training-operator family recogniser with its names.

Names only; the behaviour is in trainingoperator.py. Pure: no I/O.
"""

from __future__ import annotations

from .trainingoperator import TrainingOperatorRecognizer

RECOGNIZER = TrainingOperatorRecognizer(
    name="pytorchjob", kind="PyTorchJob", plural="pytorchjobs", replica_specs="pytorchReplicaSpecs"
)
