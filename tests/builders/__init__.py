"""Builders of the objects tests feed gangkeeper, one module per audience.

- `workloads`: pods, templates and workload objects (Job, JobSet, TrainJob, the
  training-operator kinds, LeaderWorkerSet, PodGroups) and owner lookups, for the
  recogniser and policy tests;
- `gangs`: gang member pods and GPU nodes as the controller sees them (gates, gang
  labels, creation times), for the release planning tests;
- `reviews`: AdmissionReviews and the child pods a workload's controllers would
  create, for the HTTP tests;
- `cluster`: objects created through a real API server by the end-to-end tests;
- `controllers`: JobSets and LeaderWorkerSets for the real controllers the sandbox runs
  (pods kwok runs and completes), and observers of the pods they create (and waiting
  for N of them bound or Ready);
- `trainer`: TrainJobs and TrainingRuntimes (copies of the shipped ones) for the real
  Kubeflow Trainer.
"""
