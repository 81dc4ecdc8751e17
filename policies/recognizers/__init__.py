"""Recognisers: one module per workload kind, each turning an object or a pod into gangs.

Every kind normalises to the same shape (`Gang` with roles made from pod templates,
see `common.py`), behind the `Recognizer` protocol and `Registry` of `base.py`;
`registry.py` lists the kinds gangkeeper ships and holds the two entry points,
`recognize_object` and `recognize_pod`. Adding a kind is one module here, one line
in `registry.default_registry`, one test file and one example manifest; what the rest
of gangkeeper needs about it (watches, RBAC, webhook rules and match conditions,
requeue) is derived from what its recogniser declares (`capabilities.py`).

Pure: plain dicts in, frozen dataclasses out; the only outside call is the
owner-lookup function the caller passes in. No I/O, no Kubernetes client.
"""
