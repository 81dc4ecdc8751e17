"""TFJob (kubeflow.org/v1, TensorFlow): the training-operator family recogniser with its names.

Names only; the behaviour is in trainingoperator.py. Pure: no I/O.
"""

from __future__ import annotations

from .trainingoperator import TrainingOperatorRecognizer

RECOGNIZER = TrainingOperatorRecognizer(
    name="tfjob", kind="TFJob", plural="tfjobs", replica_specs="tfReplicaSpecs"
)
