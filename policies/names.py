"""The names gangkeeper writes on gang pods and reads back (see docs/internals.md).

Only constants: the mutation (policies/mutation.py) writes these keys, the controller
and `gangkeeper status` read them. No I/O, no logic.
"""

from __future__ import annotations

#: Label on every gang pod; its value is the gang name (shortened to a label value).
GANG_LABEL = "gangkeeper.io/gang"
#: The scheduling gate gangkeeper adds on CREATE; the controller removes only this one.
GATE = "gangkeeper.io/gang"
ROLE_LABEL = "gangkeeper.io/role"
MIN_MEMBER_ANNOTATION = "gangkeeper.io/min-member"
GANG_NAME_ANNOTATION = "gangkeeper.io/gang-name"
OWNER_ANNOTATION = "gangkeeper.io/owner"
BACKEND_ANNOTATION = "gangkeeper.io/backend"

#: The Lease only one controller replica may hold at a time.
LEASE_NAME = "gangkeeper-controller"
#: `reportingController` of the Events the controller writes.
EVENT_SOURCE = "gangkeeper.io/controller"

#: Where the scheduler backends look for the group name (written by the mutation).
COSCHEDULING_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
