"""`gangkeeper view` on the sandbox, in headless Chromium: the command a researcher runs
(a subprocess, the URL with its token read from what it prints), reading the real API
server with a kubeconfig, while gangkeeper's controller and kube-scheduler release and
bind the gangs and kwok runs their pods.

1. A gang waiting for room shows its place in the queue and the numbers of its reason;
   the gang behind it names it as ahead.
2. Once room frees, the same page (no reload: its script polls /api/state) shows the
   gang released, every member bound and Ready, and the one behind moved up; the gang's
   own page and the fleet page, opened before the release, show (no reload either:
   they poll /api/gang/NS/LABEL and /api/fleet) each member bound on its node.
3. The fleet picture shows each member's GPUs on the node it is bound to.
4. A user (a ServiceAccount's token) who may list pods in one namespace and not in
   another sees the first's gangs, none of the second's, and a note naming it.

Uses the session's sandbox (`cluster`); skipped without Chromium
(tests/support/chromium.sh installs it), failed instead under GANGKEEPER_E2E=require.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from builders.cluster import GPU, POOL_LABEL, gang_pod, unique
from builders.controllers import is_ready, run_blocker
from builders.view_browser import ViewCommand, cell, require_chromium
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from bench.view_screenshots import chrome, missing

if missing() and os.environ.get("GANGKEEPER_E2E", "").lower() != "require":
    # Before the session's sandbox starts for nothing.
    pytest.skip(missing(), allow_module_level=True)

#: Seconds between the view's reads of the cluster (the page polls as often, >= 0.5 s).
REFRESH = 0.5
#: How long the page may take to show what the cluster did.
PAGE_SECONDS = 60


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_chromium()
    driver = chrome()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def view(cluster: Any) -> Iterator[ViewCommand]:
    """`gangkeeper view` with the sandbox's (admin) kubeconfig, every namespace."""
    # The session sandbox gathers every module's nodes: draw each one, whatever their number.
    with ViewCommand(cluster.kubeconfig, "--fleet-nodes", "100000", refresh=REFRESH) as command:
        yield command


def until(driver: Any, check: Any, message: str) -> Any:
    from selenium.webdriver.support.wait import WebDriverWait

    return WebDriverWait(driver, PAGE_SECONDS, poll_frequency=0.2).until(check, message)


def create_gang(cluster: Any, namespace: str, name: str, pool: str, *, size: int,
                gpus: int) -> list[str]:
    """A gang of bare pods (gangkeeper's gang annotations); the members' names."""
    pods = [f"{name}-{i}" for i in range(size)]
    for pod in pods:
        cluster.core.create_namespaced_pod(
            namespace, gang_pod(pod, pool, gpus=gpus, gang=name, min_member=size))
    return pods


def test_a_waiting_gang_shows_its_place_and_reason_then_released_and_bound_without_a_reload(
    cluster: Any, gang_namespace: str, plain_namespace: str, view: ViewCommand, browser: Any,
) -> None:
    pool = unique("view")
    nodes = cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})
    blocker = run_blocker(cluster, plain_namespace, pool, 4)
    first, second = f"{gang_namespace}/first", f"{gang_namespace}/second"
    members = create_gang(cluster, gang_namespace, "first", pool, size=2, gpus=4)
    create_gang(cluster, gang_namespace, "second", pool, size=2, gpus=4)

    browser.get(view.page("/"))
    until(browser, lambda d: cell(d, second, "position") == "2 of 2",
          "both gangs queued for the pool")
    assert cell(browser, first, "position") == "1 of 2"
    assert (cell(browser, first, "state") or "").startswith("waiting (")
    assert f"needs 8 {GPU}, 4 free on eligible nodes" in (cell(browser, first, "reason") or "")
    assert cell(browser, second, "ahead") == first
    assert cell(browser, first, "members") == "2/2 (gated 2, bound 0, Ready 0)"
    # A mark on this document: a reload or a navigation would lose it.
    browser.execute_script("window.sameDocument = true;")
    queue_tab = browser.current_window_handle
    # The gang's page and the fleet page, each in a tab of its own, opened while it waits.
    gang_tab = open_tab(browser, view.page(f"/gang/{gang_namespace}/first"))
    assert set(member_rows(browser)) == set(members)
    assert all(node == "—" for node, _ in member_rows(browser).values())
    fleet_tab = open_tab(browser, view.page("/fleet"))
    assert not any(cells_per_node(browser, f"gang {first}").values())

    try:
        cluster.core.delete_namespaced_pod(blocker, plain_namespace)
        browser.switch_to.window(queue_tab)
        until(browser,
              lambda d: cell(d, first, "members") == "2/2 (gated 0, bound 2, Ready 2)",
              "the first gang released, bound and Ready on the page")
        assert cell(browser, first, "state") == "released"
        assert cell(browser, first, "position") == "—"
        assert cell(browser, second, "position") == "1 of 1"
        assert browser.execute_script("return window.sameDocument === true;")
        # What the page says is what the cluster did.
        bound = {m: cluster.core.read_namespaced_pod(m, gang_namespace) for m in members}
        assert all(p.spec.node_name and is_ready(p) for p in bound.values())
        where = {m: p.spec.node_name for m, p in bound.items()}

        browser.switch_to.window(gang_tab)
        until(browser, lambda d: member_rows(d) == {m: (n, "bound, Ready")
                                                    for m, n in where.items()},
              f"the gang's page, not reloaded, showing its members bound on {where}")
        assert browser.execute_script("return window.sameDocument === true;")
        browser.switch_to.window(fleet_tab)
        on_nodes = {n: 4 for n in where.values()}
        until(browser, lambda d: {n: c for n, c in cells_per_node(d, f"gang {first}").items()
                                  if c} == on_nodes,
              f"the fleet page, not reloaded, showing the gang's GPUs on {on_nodes}")
        assert set(on_nodes) <= set(nodes) and len(on_nodes) == 2
        assert browser.execute_script("return window.sameDocument === true;")
    finally:
        for tab in (gang_tab, fleet_tab):
            browser.switch_to.window(tab)
            browser.close()
        browser.switch_to.window(queue_tab)


def open_tab(driver: Any, url: str) -> str:
    """`url` in a new tab, marked like the queue page (a reload would lose the mark)."""
    driver.switch_to.new_window("tab")
    driver.get(url)
    driver.execute_script("window.sameDocument = true;")
    return str(driver.current_window_handle)


def member_rows(driver: Any) -> dict[str, tuple[str, str]]:
    """The gang page's members table, pod -> (node, status), read in one step (the
    page's script replaces rows while we look)."""
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('#members tbody tr'), "
        "r => Array.from(r.cells, c => c.textContent));")
    return {pod: (node, status) for pod, node, status in rows or []}


def cells_per_node(driver: Any, title: str) -> dict[str, int]:
    """Per node row of the fleet page, how many GPU cells are bound to `title`'s gang,
    read in one step (the page's script replaces the tables while we look)."""
    found = driver.execute_script(
        "const out = {};"
        "for (const r of document.querySelectorAll('table.fleet tbody tr')) {"
        "  const n = r.querySelectorAll('span.k-gang[title=\"' + arguments[0] + '\"]').length;"
        "  out[r.cells[0].textContent.split(' ')[0]] = n;"
        "} return out;", title)
    return {str(k): int(v) for k, v in (found or {}).items()}


def test_the_fleet_picture_shows_each_member_on_its_node(
    cluster: Any, gang_namespace: str, view: ViewCommand, browser: Any,
) -> None:
    from selenium.webdriver.common.by import By

    pool = unique("view-fleet")
    nodes = cluster.create_gpu_nodes(pool, 3, 4, labels={POOL_LABEL: pool})
    members = create_gang(cluster, gang_namespace, "placed", pool, size=2, gpus=4)
    where = cluster.wait_for(
        lambda: (placed := {m: cluster.core.read_namespaced_pod(m, gang_namespace).spec.node_name
                            for m in members}) and all(placed.values()) and placed,
        timeout=60, message="both members bound",
    )
    who = f"gang {gang_namespace}/placed"

    def gang_cells(driver: Any) -> dict[str, int] | None:
        # A fresh page each time: its first paint (server HTML) must show it too; the
        # release test above checks the redraw without a reload.
        driver.get(view.page("/fleet"))
        counts = {n: c for n, c in cells_per_node(driver, who).items() if n in nodes}
        return counts if len(counts) == len(nodes) and sum(counts.values()) == 8 else None

    counts = until(browser, gang_cells, f"the fleet page listing {nodes} with the gang's GPUs")
    assert counts == {n: 4 if n in where.values() else 0 for n in nodes}
    assert len(set(where.values())) == 2  # 4 GPUs each: one member per node
    legend = browser.find_element(By.CSS_SELECTOR, "table.legend").text
    assert f"held by {who}" in legend


def test_a_user_who_may_not_list_pods_in_a_namespace_sees_none_of_its_gangs(
    cluster: Any, gang_namespace: str, browser: Any, tmp_path: Path,
) -> None:
    other = cluster.new_namespace(opted_in=True)
    rbac = client.RbacAuthorizationV1Api(cluster.api_client)
    wide = f"e2e-view-reader-{uuid.uuid4().hex[:6]}"
    try:
        pool = unique("view-rbac")
        cluster.create_gpu_nodes(pool, 1, 4, labels={POOL_LABEL: pool})
        create_gang(cluster, gang_namespace, "ours", pool, size=2, gpus=1)
        create_gang(cluster, other, "theirs", pool, size=2, gpus=1)
        kubeconfig = researcher(cluster, rbac, gang_namespace, wide, tmp_path)
        # The premise, checked: this user may list pods in one namespace, not the other.
        with kube_config.new_client_from_config(config_file=str(kubeconfig)) as api:
            as_user = client.CoreV1Api(api)
            assert as_user.list_namespaced_pod(gang_namespace).items
            with pytest.raises(ApiException) as refused:
                as_user.list_namespaced_pod(other)
            assert refused.value.status == 403

        with ViewCommand(str(kubeconfig), refresh=REFRESH) as mine:
            browser.get(mine.page("/"))
            until(browser, lambda d: cell(d, f"{gang_namespace}/ours", "state"),
                  "the readable namespace's gang on the page")
            assert f"{other}/theirs" not in browser.page_source
            notes = browser.execute_script(
                "return document.getElementById('notes').textContent;")
            assert "cannot list Pods in namespaces" in notes and other in notes
            state = httpx.get(mine.page("/api/state"), timeout=10).json()
            assert {r["namespace"] for r in state["rows"]} == {gang_namespace}
            assert httpx.get(mine.page(f"/gang/{other}/theirs"), timeout=10).status_code == 404
    finally:
        for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
            try:
                delete(wide)
            except ApiException as e:
                if e.status != 404:
                    raise
        cluster.delete_namespace(other)


def researcher(cluster: Any, rbac: Any, namespace: str, wide: str, directory: Path) -> Path:
    """A ServiceAccount that may list pods and Events in `namespace` (a Role) and Nodes
    and Namespaces (a ClusterRole named `wide`), and a kubeconfig with its token."""
    account = "researcher"
    cluster.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    rbac.create_namespaced_role(namespace, {
        "metadata": {"name": account},
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["list"]},
        ],
    })
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": account}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
    })
    rbac.create_cluster_role({
        "metadata": {"name": wide},
        "rules": [{"apiGroups": [""], "resources": ["nodes", "namespaces"],
                   "verbs": ["get", "list"]}],
    })
    rbac.create_cluster_role_binding({
        "metadata": {"name": wide}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": wide},
    })
    token = cluster.core.create_namespaced_service_account_token(
        account, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    server = admin["clusters"][0]["cluster"]
    kubeconfig = directory / "researcher.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "sandbox", "cluster": server}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "sandbox", "user": account}}],
        "current-context": account,
    }))
    # RBAC caches refresh within a second or so: wait until the Role applies.
    cluster.wait_for(lambda: _can_list(kubeconfig, namespace), timeout=30,
                     message=f"{account} allowed to list pods in {namespace}")
    return kubeconfig


def _can_list(kubeconfig: Path, namespace: str) -> bool:
    with kube_config.new_client_from_config(config_file=str(kubeconfig)) as api:
        try:
            client.CoreV1Api(api).list_namespaced_pod(namespace)
        except ApiException as e:
            if e.status == 403:
                return False
            raise
    return True
