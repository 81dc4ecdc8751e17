"""The cluster model: nodes, what they hold, and the pods on them, read into gangs.

    node_facts.py      the one Node reader (`read_node` -> `NodeFacts`)
    node_shapes.py     the shapes and bins `Capacity` compresses GPU nodes into
    node_resources.py  the non-GPU allocatable of each shape
    declared_pools.py  declared pools (`Config.pools`) as the "ever" view counts them
    capacity.py        `Capacity`: what the admission side checks gangs against
    observed_gangs.py  pods -> `PodInfo` -> `GangObservation`, a gang's state read back
    fleet.py           per-node free resources for one planning pass (the controller's)

Both sides import it: admission (`fit`, `admission`) and the controller's planning
(`release`, `autoscaling`); it imports neither. Pure: plain dicts in, frozen dataclasses
out. May import: the root vocabulary, `settings`, `assigner`.
"""
