"""XGBoostJob (kubeflow.org/v1, XGBoost): the training-operator family recogniser with its names.

Names only; the behaviour is in trainingoperator.py. Pure: no I/O.
"""

from __future__ import annotations

from .trainingoperator import TrainingOperatorRecognizer

RECOGNIZER = TrainingOperatorRecognizer(
    name="xgboostjob", kind="XGBoostJob", plural="xgboostjobs", replica_specs="xgbReplicaSpecs"
)
