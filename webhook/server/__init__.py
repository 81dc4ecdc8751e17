"""The admission server: the FastAPI app, AdmissionReview handling, the cluster view
the policy reads, metrics, TLS and logs.

Reads the cluster through `kube`; never writes to it (admission has no side effects).
"""
