"""`gangkeeper view`'s pages from a snapshot: real tables, links that carry the token,
nothing from the cluster left unescaped, every asset our own."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from builders.gangs import T0, members, node
from builders.view_cluster import queue_cluster

from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.view import pages
from gangkeeper.webhook.view.state import ViewState, build

NOW = T0 + 60
TOKEN = "tok-123"
EVIL = "<script>alert(1)</script>"


def snapshot() -> ViewState:
    pods, nodes = queue_cluster()
    return build(pods, nodes, Config(), NOW)


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text, of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    return tags


def test_queue_page_is_a_table_with_header_scopes_and_a_skip_link() -> None:
    tags = parse(pages.queue_page(snapshot(), TOKEN))
    names = [t for t, _ in tags.tags]
    assert "table" in names and "caption" in names
    scopes = {a.get("scope") for t, a in tags.tags if t == "th"}
    assert scopes == {"col", "row"}
    assert ("a", {"class": "skip", "href": "#main"}) in tags.tags
    assert ("main", {"id": "main", "tabindex": "-1"}) in tags.tags


def test_queue_row_says_position_reason_and_what_is_ahead() -> None:
    page = pages.queue_page(snapshot(), TOKEN)
    second = re.search(r'<tr data-gang="team/second">(.*?)</tr>', page, re.S)
    assert second is not None
    row = second.group(1)
    assert '<td data-col="position">3 of 3</td>' in row
    assert "nodes it may use are held for team/urgent, which came first" in row
    assert '<td data-col="ahead">team/urgent, team/first</td>' in row


def test_flagged_gangs_stand_out_in_words_as_well_as_colour() -> None:
    page = pages.queue_page(snapshot(), TOKEN)
    partial = re.search(r'<tr class="flagged" data-gang="team/partial">(.*?)</tr>', page, re.S)
    assert partial is not None and "! partly bound (1 of 2)" in partial.group(1)


def test_every_link_and_asset_is_local_and_carries_the_token() -> None:
    state = snapshot()
    for page in (pages.queue_page(state, TOKEN), pages.fleet_page(state, TOKEN),
                 pages.gang_page(state, ("team", "first"), TOKEN)):
        assert page is not None
        urls = [a.get("href") or a.get("src") for t, a in parse(page).tags
                if t in ("a", "link", "script")]
        for url in urls:
            assert url is not None and not url.startswith(("http:", "https:", "//"))
            assert url == "#main" or f"token={TOKEN}" in url


def test_filters_keep_the_token_and_show_the_chosen_values() -> None:
    page = pages.queue_page(snapshot(), TOKEN, namespace="lab", which="waiting")
    assert f'<input type="hidden" name="token" value="{TOKEN}">' in page
    assert '<option value="lab" selected>lab</option>' in page
    assert "team/first" not in page and "lab/third" in page


def test_names_reasons_and_events_from_the_cluster_are_escaped() -> None:
    pods = members("evil", 2)
    for raw in pods:
        raw["metadata"]["annotations"]["gangkeeper.io/gang-name"] = EVIL
    pods[0]["spec"].pop("schedulingGates")
    pods[0]["spec"]["nodeName"] = "a"  # so the fleet names it too
    events = [{"metadata": {"namespace": "team"}, "type": "Normal", "reason": EVIL,
               "regarding": {"kind": "Pod", "name": "evil-0"}, "note": "<b>bold</b>"}]
    state = build(pods, [node("a", 2)], Config(), NOW, events=events)
    for page in (pages.queue_page(state, TOKEN), pages.fleet_page(state, TOKEN),
                 pages.gang_page(state, ("team", "evil"), TOKEN)):
        assert page is not None
        assert EVIL not in page and "<b>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert [t for t, _ in parse(page).tags].count("script") == 1  # our own, by src


def test_gang_page_has_members_events_explain_and_a_kubectl_line() -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u"}
    pods = members("g", 2, owner=owner)
    pods[0]["spec"].pop("schedulingGates")
    pods[0]["spec"]["nodeName"] = "a"
    page = pages.gang_page(build(pods, [node("a", 4)], Config(), NOW), ("team", "g"), TOKEN,
                           context="prod")
    assert page is not None
    assert "kubectl --context prod -n team describe job.batch/train" in page
    assert "gangkeeper explain job/train -n team --context prod" in page
    assert '<tr><th scope="row">g-0</th><td>a</td><td>bound, not Ready</td></tr>' in page
    assert "Name:         team/g" in page  # explain's text
    assert "No Events." in page
    assert pages.gang_page(build(pods, [], Config(), NOW), ("team", "nope"), TOKEN) is None


def test_fleet_page_draws_a_cell_per_gpu_with_a_symbol_and_a_legend() -> None:
    page = pages.fleet_page(snapshot(), TOKEN)
    node_a = re.search(r'<tr><th scope="row">a</th>(.*?)</tr>', page, re.S)
    assert node_a is not None
    symbols = re.findall(r'<span class="cell k-(\w+)[^"]*" title="([^"]*)">([^<]*)</span>',
                         node_a.group(1))
    assert symbols == [("other", "used by another pod: other/busy", "o")] * 3 + [
        ("held", "free, held for a waiting gang: team/urgent", "H")]
    assert "<caption>Legend</caption>" in page


def test_large_fleet_page_is_one_row_per_shape() -> None:
    nodes = [node(f"n{i}", 8) for i in range(5)]
    page = pages.fleet_page(build([], nodes, Config(), NOW, aggregate_above=4), TOKEN)
    assert "<caption>Node shapes</caption>" in page
    assert '<th scope="row">8 x nvidia.com/gpu</th><td>—</td><td>5</td><td>40</td>' in page
    assert 'class="cells"' not in page


def test_state_json_rows_carry_the_cells_the_page_shows() -> None:
    data = pages.state_json(snapshot(), TOKEN, which="waiting")
    assert [r["gang"] for r in data["rows"]] == ["urgent", "first", "few", "second", "third"]
    second = data["rows"][3]
    assert second["cells"] == pages.queue_cells(snapshot().rows[5])
    assert second["position"] == 3 and second["href"] == "/gang/team/second?token=tok-123"
    assert data["fleet"]["held"] == 3
