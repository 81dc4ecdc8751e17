module gangkeeper.io/sandbox/provisioning-request

go 1.22.0

require k8s.io/autoscaler/cluster-autoscaler/apis v0.0.0-20240830133931-adfbe7e45277
