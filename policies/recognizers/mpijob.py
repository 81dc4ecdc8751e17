"""MPIJob: the training-operator family recogniser with its names.

Both the training-operator's kubeflow.org/v1 MPIJob and the mpi-operator's
kubeflow.org/v2beta1 MPIJob (the one its upstream examples use) keep their replicas
in `spec.mpiReplicaSpecs` (Launcher, Worker), so one recogniser serves both.
"""

from __future__ import annotations

from .trainingoperator import TrainingOperatorRecognizer

RECOGNIZER = TrainingOperatorRecognizer(
    name="mpijob",
    kind="MPIJob",
    plural="mpijobs",
    replica_specs="mpiReplicaSpecs",
    versions=("v1", "v2beta1"),
)
