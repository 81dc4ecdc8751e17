"""PyTorchJob (kubeflow.org/v1, PyTorch): the training-operator family recogniser with its names."""

from __future__ import annotations

from .trainingoperator import TrainingOperatorRecognizer

RECOGNIZER = TrainingOperatorRecognizer(
    name="pytorchjob", kind="PyTorchJob", plural="pytorchjobs", replica_specs="pytorchReplicaSpecs"
)
