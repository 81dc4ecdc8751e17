"""`gangkeeper ungate`: release gated gangs while the gang controller is not running
(gangkeeper uninstalled, or scaled to zero), keeping all-or-nothing.

Lists Pods and Nodes, runs the controller's own planning pass after pass
(`policies.release.ungate`), and lifts the gates of exactly the gangs the controller
would release now, as it would — creating their PodGroup first where the backend
needs one, deleting their placeholder pods, pinning each member to the node the plan
chose (placement `pinned`: the stock scheduler cannot then split a mixed gang) and
adding a provisioned ProvisioningRequest's consume annotations — with the controller's
guarded patch (a test of the gates and the resourceVersion read: a pod changed
meanwhile is left alone). Every other gated gang is listed with
why it waits; `--force` lifts their gates too, with a warning: those gangs may then
bind partly. `--dry-run` only lists.

    gangkeeper ungate [-n NS | -A] [--dry-run] [--force] [--kubeconfig PATH]
                      [--context NAME] [--config FILE]

Exit codes: 0 no gang left gated, 1 gangs left gated (or a patch refused), 2 bad input
or the API unreachable. I/O: lists Pods, Nodes (and ProvisioningRequests where the
config asks through them), writes PodGroups and pod patches, deletes placeholder pods.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .cluster_state import add_cluster_arguments, add_namespace_arguments, cluster_state_of
from .exit_codes import EXIT_BAD_INPUT, EXIT_LEFT_GATED, EXIT_OK

if TYPE_CHECKING:
    from gangkeeper.policies.cluster.observed_gangs import PodInfo
    from gangkeeper.policies.release.results import Release


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "ungate",
        help="release the gated gangs that fit now (for when the controller is not running)",
        description="Release every gated gang that fits now, as the gang controller would; "
        "list the others with why they wait. --force releases those too (not all-or-nothing).",
    )
    add_namespace_arguments(parser)
    parser.add_argument("--dry-run", action="store_true", help="list what would be released")
    parser.add_argument(
        "--force", action="store_true",
        help="also lift the gates of gangs that do not fit now (they may bind partly)",
    )
    add_cluster_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gangkeeper.policies.release.ungate import ungate_plan

    state = cluster_state_of(args)
    if state is None:
        return EXIT_BAD_INPUT
    rest, config = state.rest, state.config
    decided = ungate_plan(state.pods, state.nodes, config, time.time(), namespace=args.namespace,
                          requests=state.requests)
    verb = "would release" if args.dry_run else "released"
    failed = 0
    for release in decided.releases:
        gang = release.gang
        done = 0 if args.dry_run else _release(rest, release)
        failed += 0 if args.dry_run else len(release.pods) - done
        count = len(release.pods) if args.dry_run else done
        print(f"{verb} {gang.namespace}/{gang.name}: {count} of {len(release.pods)} "
              f"gated members (fits now)")
    for report in decided.waiting:
        members = decided.waiting_pods.get((report.namespace, report.label), ())
        if args.force and members:
            done = len(members) if args.dry_run else _lift(rest, members)
            failed += len(members) - done
            print(f"{'would force' if args.dry_run else 'forced'} {report.namespace}/"
                  f"{report.name}: {done} of {len(members)} gated members, although it "
                  f"waits: {report.reason}")
        else:
            print(f"left gated {report.namespace}/{report.name}: {report.gated} members; "
                  f"{report.reason}")
    forced = decided.waiting if args.force else ()
    if forced:
        print(
            f"warning: --force lifted the gates of {len(forced)} gang(s) that do not fit "
            "now: their members are scheduled one by one and may bind partly, holding GPUs "
            "while they wait for the rest (not all-or-nothing)",
            file=sys.stderr,
        )
    if not decided.releases and not decided.waiting:
        print("No gated gangs.")
    if failed:
        print(f"gangkeeper ungate: {failed} member(s) changed meanwhile and were left "
              "gated; run it again", file=sys.stderr)
        return EXIT_LEFT_GATED
    if decided.waiting and not args.force:
        return EXIT_LEFT_GATED
    return EXIT_OK


def _release(rest: Any, release: Release) -> int:
    """Release as the controller does: create the group object if needed, delete the
    gang's placeholder pods (their room is the gang's), then lift the gates with the
    controller's guarded patch, pinning each member where the plan placed it and adding
    a provisioned request's consume annotations; how many were lifted."""
    from ..controller.group_writer import GroupWriter
    from ..controller.writes import WRITE_QUERY, delete_options
    from ..kube.api import ApiError
    from ..kube.resources import PODS

    gang = release.gang
    groups = GroupWriter(rest, lambda *_: None)
    if release.needs_group and not groups.ensure(gang):
        print(f"  {gang.namespace}/{gang.name}: its PodGroup could not be created "
              "(see the warning above); left gated", file=sys.stderr)
        return 0
    for placeholder in release.placeholders:
        path = PODS.object_path(placeholder.namespace, placeholder.name)
        try:
            rest.request("DELETE", path, WRITE_QUERY,
                         body=delete_options(placeholder.uid, grace_seconds=0))
        except ApiError as exc:
            if exc.status not in (404, 409):  # gone already, or another pod by that name
                print(f"  placeholder {placeholder.namespace}/{placeholder.name}: {exc}",
                      file=sys.stderr)
    return _lift(rest, release.pods, release.pins, release.annotations, time.time())


def _lift(
    rest: Any, pods: Sequence[PodInfo], pins: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None, wall: float | None = None,
) -> int:
    """Lift gangkeeper's gate from each pod (pinned where `pins` says) with the
    controller's own request (`controller.gate_lifter`); how many."""
    from ..controller.gate_lifter import lift_gate
    from ..kube.api import ApiError

    lifted = 0
    for pod in pods:
        try:
            lift_gate(rest, pod, (pins or {}).get(pod.uid), wall, annotations)
        except ApiError as exc:
            print(f"  {pod.namespace}/{pod.name}: {exc}", file=sys.stderr)
            continue
        lifted += 1
    return lifted
