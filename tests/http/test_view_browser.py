"""`gangkeeper view` in a real browser: headless Chromium loads the queue page served
from a `FakeApi` cluster, finds the waiting gang's row, and sees it released once the
fake cluster binds the gang, without a reload (the page's own script polls
/api/state); the gang's page and the fleet page do the same (they poll
/api/gang/NS/LABEL and /api/fleet). Skipped, saying what to run, where Chromium is not installed
(tests/support/chromium.sh installs it); required under GANGKEEPER_E2E=require."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from builders.gangs import T0
from builders.view_browser import cell, require_chromium
from builders.view_cluster import bind, queue_cluster

from bench.view_screenshots import PODS, LoopbackView, chrome, fake_api


@pytest.fixture(autouse=True)
def _chromium() -> None:
    require_chromium()


NOW = T0 + 60


@pytest.fixture
def browser() -> Iterator[Any]:
    driver = chrome()
    try:
        yield driver
    finally:
        driver.quit()


def test_the_queue_page_shows_a_gang_released_without_a_reload(browser: Any) -> None:
    from selenium.webdriver.support.wait import WebDriverWait

    pods, nodes = queue_cluster()
    api = fake_api(pods, nodes)
    with LoopbackView(api, refresh_seconds=0.2, clock=lambda: NOW) as view:
        browser.get(view.url("/"))
        assert cell(browser, "team/urgent", "state") == "waiting (no-fit)"
        assert cell(browser, "team/urgent", "position") == "1 of 3"
        assert cell(browser, "team/first", "ahead") == "team/urgent"
        # A mark on this document: a reload would lose it.
        browser.execute_script("window.sameDocument = true;")
        bind(pods, "urgent", "a")
        api.seed(PODS, *pods)
        WebDriverWait(browser, 15, poll_frequency=0.1).until(
            lambda d: cell(d, "team/urgent", "state") == "released"
        )
        assert cell(browser, "team/urgent", "position") == "—"
        assert cell(browser, "team/first", "position") == "1 of 2"
        assert browser.execute_script("return window.sameDocument === true;")


def test_the_gang_and_fleet_pages_show_a_gang_bound_without_a_reload(browser: Any) -> None:
    from selenium.webdriver.support.wait import WebDriverWait

    def members(driver: Any) -> list[list[str]]:
        return list(driver.execute_script(
            "return Array.from(document.querySelectorAll('#members tbody tr'), "
            "r => Array.from(r.cells, c => c.textContent));"))

    def on_b(driver: Any) -> list[str]:
        return list(driver.execute_script(
            "const r = Array.from(document.querySelectorAll('table.fleet tbody tr'))"
            ".find(r => r.cells[0].textContent.split(' ')[0] === 'b');"
            "return r ? Array.from(r.querySelectorAll('span.cell'), c => c.title) : [];"))

    pods, nodes = queue_cluster()
    api = fake_api(pods, nodes)
    with LoopbackView(api, refresh_seconds=0.2, clock=lambda: NOW) as view:
        browser.get(view.url("/gang/team/second"))
        gated = "gated: the gang is waiting (held)"
        assert members(browser) == [["second-0", "—", gated], ["second-1", "—", gated]]
        browser.execute_script("window.sameDocument = true;")
        gang_tab = browser.current_window_handle
        browser.switch_to.new_window("tab")
        browser.get(view.url("/fleet"))
        held = "free, held for a waiting gang: team/urgent"
        assert on_b(browser) == ["gang team/done"] * 2 + [held] * 2
        browser.execute_script("window.sameDocument = true;")

        bind(pods, "second", "b")
        api.seed(PODS, *pods)
        WebDriverWait(browser, 15, poll_frequency=0.1).until(
            lambda d: on_b(d) == ["gang team/done"] * 2 + ["gang team/second"] * 2)
        legend = browser.execute_script("return document.getElementById('legend').textContent;")
        assert "held by gang team/second" in legend
        assert browser.execute_script("return window.sameDocument === true;")
        browser.switch_to.window(gang_tab)
        WebDriverWait(browser, 15, poll_frequency=0.1).until(
            lambda d: members(d) == [["second-0", "b", "bound, Ready"],
                                     ["second-1", "b", "bound, Ready"]])
        facts = browser.execute_script("return document.getElementById('facts').textContent;")
        assert "Statereleased" in facts
        explain = browser.execute_script(
            "return document.getElementById('explain').textContent;")
        assert "second-0  no     b" in explain
        assert browser.execute_script("return window.sameDocument === true;")


def test_keyboard_reaches_the_skip_link_first_and_it_moves_focus_to_the_content(
    browser: Any,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    pods, nodes = queue_cluster()
    with LoopbackView(fake_api(pods, nodes), clock=lambda: NOW) as view:
        browser.get(view.url("/"))
        browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
        active = browser.switch_to.active_element
        assert active.text == "Skip to content"
        active.send_keys(Keys.ENTER)
        assert browser.switch_to.active_element.get_attribute("id") == "main"
