"""PaddleJob (kubeflow.org/v1, PaddlePaddle): the training-operator recogniser, named.

Names only; the behaviour is in trainingoperator.py. Pure: no I/O.
"""

from __future__ import annotations

from .trainingoperator import TrainingOperatorRecognizer

RECOGNIZER = TrainingOperatorRecognizer(
    name="paddlejob", kind="PaddleJob", plural="paddlejobs", replica_specs="paddleReplicaSpecs"
)
