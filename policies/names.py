"""Every name gangkeeper writes on objects or looks for, in one place.

Users, their tools and other controllers rely on these (the README lists them, and a
test holds the README's table to this module): the mutation writes the pod keys, the
controller and `gangkeeper status` read them back, the install manifests and the
sandbox select on the opt-in labels. The names of the install objects themselves
(Deployment, Service, webhook configurations, ...) are in `gangkeeper.webhook.install.names`.

Only constants: no I/O, no logic.
"""

from __future__ import annotations

# --- on gang pods (written by the mutation) ------------------------------------------

#: Label on every gang pod; its value is the gang name (shortened to a label value).
GANG_LABEL = "gangkeeper.io/gang"
#: The scheduling gate gangkeeper adds on CREATE; the controller removes only this one.
GATE = "gangkeeper.io/gang"
#: Label: the pod's role within its gang.
ROLE_LABEL = "gangkeeper.io/role"
#: Annotation: minMember as a decimal string (also the user's explicit annotation).
MIN_MEMBER_ANNOTATION = "gangkeeper.io/min-member"
#: Annotation: the full gang name (also the user's explicit annotation).
GANG_NAME_ANNOTATION = "gangkeeper.io/gang-name"
#: Annotation: JSON {"apiVersion","kind","name","uid"} of the gang's top-level owner.
OWNER_ANNOTATION = "gangkeeper.io/owner"
#: Annotation: the backend chosen for this pod.
BACKEND_ANNOTATION = "gangkeeper.io/backend"
#: Annotation on members of a gang with members that arrive only after release
#: (`Role.later`): `[{"count": n, "demand": {resource: per member}, "nodeSelector": {...}}]`,
#: so the controller can release without them and hold their room until they come.
LATER_ANNOTATION = "gangkeeper.io/later-members"

#: Where the scheduler backends look for the group name (written by the mutation).
COSCHEDULING_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"

# --- set by users --------------------------------------------------------------------

#: Namespace label that opts a namespace in (value "true").
ENABLED_LABEL = "gangkeeper.io/enabled"
#: Pod label by which a user opts one pod out (value "true").
SKIP_LABEL = "gangkeeper.io/skip"

# --- written by the controller -------------------------------------------------------

#: The Lease only one controller replica may hold at a time.
LEASE_NAME = "gangkeeper-controller"
#: `reportingController` of the Events the controller writes.
EVENT_SOURCE = "gangkeeper.io/controller"
#: `fieldManager` of every write the controller makes (shown in managedFields).
FIELD_MANAGER = "gangkeeper"
#: Label on the PodGroups the controller creates.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gangkeeper"

# --- where gangkeeper runs -----------------------------------------------------------

#: gangkeeper's own namespace unless told otherwise (never gang-keyed or validated).
DEFAULT_NAMESPACE = "gangkeeper-system"

# --- the install objects (rendered by `gangkeeper.webhook.install`) ------------------

#: The ServiceAccount, Deployment, roles and bindings, PodDisruptionBudget.
APP_NAME = "gangkeeper"
SERVICE_NAME = "gangkeeper"
#: Self-managed mode: gangkeeper keeps its CA and certificate here (`serve` uses
#: `<service>-tls`); cert-manager mode: the Certificate's Secret, mounted read-only.
SECRET_NAME = "gangkeeper-tls"
CERTIFICATE_NAME = "gangkeeper-serving"
ISSUER_NAME = "gangkeeper-selfsigned"
CONFIGMAP_NAME = "gangkeeper-config"
MUTATING_WEBHOOK_CONFIGURATION = "gangkeeper-mutating"
VALIDATING_WEBHOOK_CONFIGURATION = "gangkeeper-validating"
WEBHOOK_CONFIGURATIONS = (MUTATING_WEBHOOK_CONFIGURATION, VALIDATING_WEBHOOK_CONFIGURATION)
#: The webhooks inside those configurations.
POD_MUTATE_WEBHOOK = "pods.mutate.gangkeeper.io"
POD_VALIDATE_WEBHOOK = "pods.validate.gangkeeper.io"
WORKLOAD_VALIDATE_WEBHOOK = "workloads.validate.gangkeeper.io"
