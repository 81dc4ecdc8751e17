"""TFJob (kubeflow.org/v1, TensorFlow): the training-operator family recogniser with its names."""

from __future__ import annotations

from .trainingoperator import TrainingOperatorRecognizer

RECOGNIZER = TrainingOperatorRecognizer(
    name="tfjob", kind="TFJob", plural="tfjobs", replica_specs="tfReplicaSpecs"
)
