"""`gangkeeper view` in a real browser: headless Chromium loads the queue page served
from a `FakeApi` cluster, finds the waiting gang's row, and sees it released once the
fake cluster binds the gang, without a reload (the page's own script polls
/api/state). Skipped, saying what to run, where Chromium is not installed
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
