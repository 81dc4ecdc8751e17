"""Gangs on autoscaled pools: the decisions behind placeholder capacity.

cluster-autoscaler and Karpenter add nodes only for pods the scheduler found
`Unschedulable`; a gated gang member is `SchedulingGated` and never a candidate. So a
gang that waits for nodes an autoscaler must add gets one placeholder pod per member
that has no room now: not gated, the member's requests and hard constraints, a pause
image, a low PriorityClass. The autoscaler adds nodes for them; once they are bound
the controller deletes them and releases the gang onto their nodes in one pass.

    placeholders.py the placeholder pod for one member (a plain dict)
    asking.py       which gangs may ask for nodes, for which members, and when an
                    ask has timed out (called from `release.plan`)
    provisioning.py the ProvisioningRequest path (`autoscaling: provisioningrequest`):
                    one request per gang and attempt, its conditions read as Kueue
                    reads them, the consume annotations of the release

Its config keys are `settings.autoscaling`'s.

Pure: plain dicts and `PodInfo`s in, frozen dataclasses and dicts out. The writes
(create, delete, Events) are `webhook.controller.placeholders`' and
`webhook.controller.provisioning`'s.
"""
