"""batch/v1 Job: its `parallelism` pods run at once and form the gang.

Indexed or not, the Job controller keeps min(parallelism, completions) pods running
(completions unset means "until one succeeds", so parallelism pods). A suspended Job
is still validated: it is about to be resumed. A Job Kueue may admit partially
(annotation `kueue.x-k8s.io/job-min-parallelism`, kubernetes-sigs/kueue v0.17.0
`pkg/controller/jobs/job/job_controller.go` minPodsCount) can run with that many
pods: until it runs, its gang minimum is that number, not parallelism. Once it runs
(`spec.suspend: false`) Kueue has set `parallelism` to the count it admitted
(`RunWithPodSetsInfo`), and those pods are the gang, all of them. A Job that is part
of a JobSet belongs to the JobSet's gang, so its pods are left to the JobSet recogniser.

Pure: reads dicts and calls the caller's lookup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidObject
from ..model import Gang, KubeObject, OwnerLookup, PodMembership
from ..podspec import as_mapping, field_path
from ..settings.config import Config
from .base import PodSignals, Requeuing, ResourceRule
from .common import (
    build_gang,
    claims,
    count,
    count_text,
    owner_chain,
    owner_gangs,
    read_meta,
    template_role,
    topmost,
)

JOB = ("batch", "Job")
JOBSET = ("jobset.x-k8s.io", "JobSet")
ROLE = "worker"
KUEUE_MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"


def job_pods(spec: Mapping[str, Any], path: str) -> int:
    """How many pods of a Job spec run at the same time."""
    parallelism = count(spec.get("parallelism"), field_path(path, "parallelism"), 1)
    completions = spec.get("completions")
    if completions is None:
        return parallelism
    return min(parallelism, count(completions, field_path(path, "completions"), 1))


def _kueue_minimum(annotations: Mapping[str, str]) -> int | None:
    raw = annotations.get(KUEUE_MIN_PARALLELISM)
    if raw is None:
        return None
    path = field_path("metadata.annotations", KUEUE_MIN_PARALLELISM)
    minimum = count_text(raw, path)
    if minimum < 1:
        raise InvalidObject(path, "must be at least 1")
    return minimum


class JobRecognizer:
    name = "job"
    rules = (ResourceRule("batch", ("v1",), "jobs", "Job"),)
    requeue = Requeuing(
        "suspend",
        "requeue a Job's gang without failing the Job (a pod deleted by anyone but the Job "
        "controller counts against backoffLimit): set spec.suspend, so the Job controller "
        "deletes its pods uncounted, and unset it once they are gone, with gangkeeper's "
        "label and requeue count (rebindSeconds, podsReadyRequeue); patch only: get and "
        "list (a new leader finds the Jobs left suspended by label) come from the owner rule",
    )

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        if not claims(obj, JOB, self.rules[0].versions):
            return None
        meta = read_meta(obj)
        spec = as_mapping(obj.get("spec"), "spec", required=True)
        part = template_role(
            ROLE, job_pods(spec, "spec"), spec.get("template"), "spec.template", config
        )
        # A running Job's parallelism is what Kueue admitted (or the user's, if Kueue
        # does not manage it): none of those pods may start without the others.
        running = spec.get("suspend") is False
        minimum = None if running else _kueue_minimum(meta.annotations)
        gang = build_gang(meta, meta.name, [part], self.name, minimum)
        return [gang] if gang is not None else []

    def may_claim(self, signals: PodSignals) -> bool:
        return JOB in signals.owners

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        namespace = read_meta(pod).namespace
        link = topmost(owner_chain(pod, namespace, lookup), {JOB}, {JOBSET})
        # Without the Job itself the size is unknown; the job-name label alone
        # would only be a guess, so the pod is left to other recognisers.
        if link is None or link.obj is None:
            return None
        gangs = owner_gangs(self, link.obj, lookup, config)
        return PodMembership(gangs[0], ROLE) if gangs else None
