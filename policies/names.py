"""Every name gangkeeper writes on objects or looks for, in one place.

Users, their tools and other controllers rely on these (docs/names.md lists them, and a
test holds that table to this module): the mutation writes the pod keys, the
controller and `gangkeeper status` read them back, the install manifests and the
sandbox select on the opt-in labels. The names of the install objects themselves
(Deployment, Service, webhook configurations, ...) are in `gangkeeper.webhook.install.names`.
Metric names and Event reasons are declared in `catalogue.py`.

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

#: Annotations on a gang's pods (set on the pod template): keep the whole gang inside one
#: domain of this node label key (required), or in as few as possible (preferred). The
#: key must be listed in the config's `topology`.
TOPOLOGY_REQUIRED_ANNOTATION = "gangkeeper.io/topology-required"
TOPOLOGY_PREFERRED_ANNOTATION = "gangkeeper.io/topology-preferred"

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
#: Label on the placeholder pods the controller creates for a gang that waits for
#: nodes an autoscaler must add; its value is the gang label's. Placeholders are not
#: members: they carry no gang label, and `SKIP_LABEL` keeps the webhook off them.
PLACEHOLDER_LABEL = "gangkeeper.io/placeholder-for"
#: Annotation on a placeholder: the name of the member pod it holds room for.
PLACEHOLDER_MEMBER_ANNOTATION = "gangkeeper.io/placeholder-member"
#: The PriorityClass of placeholders (installed with gangkeeper): below every real
#: workload, so any pod preempts them, and above cluster-autoscaler's expendable cutoff
#: (-10 by default), so the autoscaler still adds nodes for them.
PLACEHOLDER_PRIORITY_CLASS = "gangkeeper-placeholder"
PLACEHOLDER_PRIORITY = -5
#: Label on the ProvisioningRequests and PodTemplates the controller creates for a
#: gang that waits for nodes (`autoscaling: provisioningrequest`): the gang label.
PROVISIONING_LABEL = "gangkeeper.io/provisioning-for"
#: Label on those PodTemplates: the name of the ProvisioningRequest that uses them.
PROVISIONING_REQUEST_LABEL = "gangkeeper.io/provisioning-request"
#: cluster-autoscaler's annotations on the pods that consume a ProvisioningRequest's
#: booked capacity (its API's ProvisioningRequestPodAnnotationKey and
#: ProvisioningClassPodAnnotationKey); written on release, as Kueue writes them.
CONSUME_PROVISIONING_REQUEST_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
PROVISIONING_CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
#: Karpenter's annotation that keeps it from consolidating a node away under a pod.
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
#: Label on the PodGroups the controller creates.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gangkeeper"

#: Node label versions before the matchFields pin (`assigner.pin`) pinned a released
#: member by (`spec.nodeSelector`); still read as a pin while such pods live.
PIN_LABEL = "kubernetes.io/hostname"

#: Annotation the controller writes in the same patch: when (RFC 3339) it released and
#: pinned the member; the watchdog (`rebindSeconds`) reads it back.
RELEASED_AT_ANNOTATION = "gangkeeper.io/released-at"

#: PodGroup annotation the controller changes to nudge a coscheduling scheduler that
#: parked the gang (value: the time of the capacity change; only the change matters).
NUDGE_ANNOTATION = "gangkeeper.io/capacity-changed-at"

#: Label the controller puts on a Job it suspended to requeue its gang (value
#: `REQUEUE_SUSPENDED`); it resumes the Job and removes the label once the pods are
#: gone, and a new leader finds the Jobs it must resume by this label.
REQUEUE_LABEL = "gangkeeper.io/requeue"
REQUEUE_SUSPENDED = "suspended"
#: Annotation on such a Job: how many times the controller requeued it (bounded by
#: `rebindRetries`, read back by any leader).
REQUEUES_ANNOTATION = "gangkeeper.io/requeues"

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
#: cert-manager mode's chain: the self-signed Issuer only signs the CA Certificate (its
#: Secret has the CA's name), whose CA Issuer signs the serving certificate, so a renewal
#: of the serving certificate leaves the webhooks' caBundle unchanged.
ISSUER_NAME = "gangkeeper-selfsigned"
CA_CERTIFICATE_NAME = "gangkeeper-ca"
CA_ISSUER_NAME = "gangkeeper-ca-issuer"
CONFIGMAP_NAME = "gangkeeper-config"
MUTATING_WEBHOOK_CONFIGURATION = "gangkeeper-mutating"
VALIDATING_WEBHOOK_CONFIGURATION = "gangkeeper-validating"
WEBHOOK_CONFIGURATIONS = (MUTATING_WEBHOOK_CONFIGURATION, VALIDATING_WEBHOOK_CONFIGURATION)
#: The webhooks inside those configurations.
POD_MUTATE_WEBHOOK = "pods.mutate.gangkeeper.io"
POD_VALIDATE_WEBHOOK = "pods.validate.gangkeeper.io"
WORKLOAD_VALIDATE_WEBHOOK = "workloads.validate.gangkeeper.io"
#: The ValidatingAdmissionPolicy (and its binding) that limits gangkeeper's pod patches.
POD_UPDATE_POLICY = "gangkeeper-pod-updates"
