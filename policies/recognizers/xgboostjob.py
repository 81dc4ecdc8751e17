"""XGBoostJob (kubeflow.org/v1, XGBoost): the training-operator family recogniser with its names."""

from __future__ import annotations

from .trainingoperator import TrainingOperatorRecognizer

RECOGNIZER = TrainingOperatorRecognizer(
    name="xgboostjob", kind="XGBoostJob", plural="xgboostjobs", replica_specs="xgbReplicaSpecs"
)
