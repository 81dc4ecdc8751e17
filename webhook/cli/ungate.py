"""`gangkeeper ungate`: release gated gangs while the gang controller is not running
(gangkeeper uninstalled, or scaled to zero), keeping all-or-nothing.

Lists Pods and Nodes, runs the controller's own planning pass after pass
(`policies.release.ungate`), and lifts the gates of exactly the gangs the controller
would release now, through the controller's own `Releaser` — creating their PodGroup
first where the backend needs one, deleting their placeholder pods, pinning each
member to the node the plan chose (placement `pinned`: the stock scheduler cannot
then split a mixed gang) and adding a provisioned ProvisioningRequest's consume
annotations — with the controller's guarded patch (a test of the gates and the
resourceVersion read: a pod changed meanwhile is left alone, unless only what no plan
reads changed, when it is retried once as the controller does). Every other gated
gang is listed with why it waits; `--force` lifts their gates too, with a warning:
those gangs may then bind partly. `--dry-run` only lists.

    gangkeeper ungate [-n NS | -A] [--dry-run] [--force] [--kubeconfig PATH]
                      [--context NAME] [--config FILE]

Exit codes: 0 no gang left gated, 1 gangs left gated (or a patch refused), 2 bad input
or the API unreachable. I/O: lists Pods, Nodes (and ProvisioningRequests where the
config asks through them, and DeviceClasses: a resource one serves is left out of a
PodGroup's minResources), writes PodGroups and pod patches, deletes placeholder pods.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .cluster_state import add_cluster_arguments, add_namespace_arguments, cluster_state_of
from .exit_codes import EXIT_BAD_INPUT, EXIT_LEFT_GATED, EXIT_OK

if TYPE_CHECKING:
    from gangkeeper.policies.cluster.observed_gangs import PodInfo
    from gangkeeper.policies.release.results import Release
    from gangkeeper.policies.settings.config import Config

    from ..controller.releaser import Releaser
    from ..kube.api import Api


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
    config = state.config
    decided = ungate_plan(state.pods, state.nodes, config, time.time(), namespace=args.namespace,
                          requests=state.requests)
    with _releaser(state.rest, config) as releaser:
        return _report(args, decided, releaser)


def _report(args: argparse.Namespace, decided: Any, releaser: Releaser) -> int:
    verb = "would release" if args.dry_run else "released"
    failed = 0
    for release in decided.releases:
        gang = release.gang
        done = 0 if args.dry_run else _release(releaser, release)
        failed += 0 if args.dry_run else len(release.pods) - done
        count = len(release.pods) if args.dry_run else done
        print(f"{verb} {gang.namespace}/{gang.name}: {count} of {len(release.pods)} "
              f"gated members (fits now)")
    for report in decided.waiting:
        members = decided.waiting_pods.get((report.namespace, report.label), ())
        if args.force and members:
            done = len(members) if args.dry_run else _lift(releaser, members)
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


@contextmanager
def _releaser(rest: Api, config: Config) -> Iterator[Releaser]:
    """The controller's `Releaser`, its placeholders deleted by the controller's writer
    (on a pool of this command's own), writing unfenced: no controller runs."""
    from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info

    from ..controller.group_writer import GroupWriter
    from ..controller.placeholders import PlaceholderWriter
    from ..controller.releaser import Releaser
    from ..controller.writes import WRITE_QUERY

    def nothing(*_: Any, **__: Any) -> None:
        return None

    served = _served_by_devices(rest)
    with ThreadPoolExecutor(8, thread_name_prefix="ungate") as pool:
        placeholders = PlaceholderWriter(rest, config, pool=lambda: pool, emit=nothing,
                                         count=nothing, write_query=WRITE_QUERY)
        yield Releaser(
            rest, GroupWriter(rest, nothing, lambda: served), placeholders.delete,
            lambda raw: pod_info(raw, config) if is_live(raw) else None, nothing,
        )


def _served_by_devices(rest: Api) -> frozenset[str]:
    """The resources DeviceClasses serve by `extendedResourceName`, which a PodGroup
    leaves out of minResources as the controller's does; a class that cannot be read
    counts as absent, as in the controller's view."""
    from gangkeeper.policies.dra import read_device_class
    from gangkeeper.policies.errors import PolicyError

    from ..kube.device_view import CLASSES, served_by_classes
    from ..kube.informer import list_readable

    classes = []
    for obj in list_readable(rest, CLASSES.path):
        try:
            classes.append(read_device_class(obj))
        except PolicyError:
            continue
    return served_by_classes(classes)


def _release(releaser: Releaser, release: Release) -> int:
    """Release as the controller does (`Releaser`): the group object if needed, the
    gang's placeholder pods deleted, then the gates lifted, each member pinned where
    the plan placed it; how many were lifted."""
    gang = release.gang
    if not releaser.prepare([release]):
        print(f"  {gang.namespace}/{gang.name}: its PodGroup could not be created "
              "(see the warning above); left gated", file=sys.stderr)
        return 0
    return _lift(releaser, release.pods, release)


def _lift(releaser: Releaser, pods: Sequence[PodInfo], release: Release | None = None) -> int:
    """Lift gangkeeper's gate from each pod (pinned and annotated as `release` says);
    how many."""
    lifted = 0
    for pod in pods:
        if release is None:
            outcome = releaser.lift(pod)
        else:
            outcome = releaser.lift(pod, release.pins.get(pod.uid), release.annotations)
        if outcome != "ungated":
            print(f"  {pod.namespace}/{pod.name}: left gated ({outcome})", file=sys.stderr)
            continue
        lifted += 1
    return lifted
