"""gangkeeper's process: everything that talks to the API server, serves HTTP, runs
threads or reads the user's files. The decisions are `gangkeeper.policies`' (pure).

One folder per part, each allowed to import only the ones below it (checked by
import-linter's layers contract):

    cli/         `gangkeeper` and one module per command (serve, check, certs,
                 manifests, sandbox, status, ungate): parses flags, wires the parts, exits.
    sandbox/     the local control plane behind `gangkeeper sandbox` and the
                 end-to-end tests (starts processes, writes files under --dir;
                 `faults`: replicas, signals, restarts, etcd compaction for tests).
    server/      the admission server: FastAPI app, AdmissionReview in/out
                 (`admission`, pure), the cluster view the policy reads, metrics
                 (pure bookkeeping), TLS reload, JSON logs. Reads the API, never writes.
    controller/  the gang controller: its reconcile loop and its writes (gate
                 removal, PodGroups, Events, placeholders, ProvisioningRequests),
                 fenced against a stale leader (`fencing`), with test-only fault
                 injection (`faults`); what to
                 release is planned by `gangkeeper.policies.release`.
    kube/        the API: `Api` protocol (`api`), the JSON client (`rest`, `direct`),
                 kubeconfig loading (`client`), the one list+watch (`informer`),
                 leader election (`election` decides, `lease` loops), an in-memory
                 `FakeApi` for tests (`fake`) and resource paths (`resources`).
    install/     the install objects rendered as data (RBAC, webhook rules, the
                 Deployment, cert-manager, YAML, Helm): pure.
    files/       reading manifests, fleets and the config file.

May do I/O: cli, sandbox, server (app, cluster view, TLS), controller, kube (rest,
direct, client, informer, lease), files. Pure (import contracts keep them so):
install, kube.api/election/fake/resources, server.admission and server.metrics.
"""
