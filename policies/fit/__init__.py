"""Could a gang ever run, and does it fit now: the checks behind an admission verdict.

    feasibility.py   `check_gang`, `fits_now`: the verdict, from the checks below
    packing.py       the exact branch-and-bound packing search over node bins
    resource_fit.py  cpu, memory, ephemeral-storage, with numbers
    topology_fit.py  a `topology-required` gang no single domain could hold
    warning_text.py  every admission warning cut to the API server's 120 characters

Pure. May import: `cluster` and the root vocabulary; never `recognizers`, `admission`,
`release` or `autoscaling` (import-linter's layers contract).
"""
