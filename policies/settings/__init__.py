"""The config: every key of the server's config file, parsed into frozen dataclasses.

    config.py       `Config`, `NodePool`, `load_config(mapping)` (the pure half of
                    `webhook/files/config.py`, which reads the file)
    autoscaling.py  the autoscaling keys, parsed into a frozen `Autoscaling`
    checks.py       the value checks both loaders use, each raising `InvalidConfig`

The lowest package of policies/: it imports only `errors`, `model`, `names` and
`quantity`, so every other part may read a `Config` without a cycle.
"""
