"""report.html in a real headless Chromium (Debian's): no console error, no request, every figure drawn.

Playwright drives /usr/bin/chromium (``make test`` installs it with apt; Playwright downloads
no browser). Every request the page makes is routed here and any that is not the file
itself fails the test, so "self-contained" is checked by the browser, not by a regex.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from PIL import Image, ImageStat
from playwright import sync_api

from reprofleet.records.pooling import load_pool
from reprofleet.report import render_html, render_markdown
from reprofleet.verdicts import judge

from tests.support.synthetic_campaign import Spec, build, write
from tests.support.report_text import markdown_verdicts

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]

if shutil.which(CHROMIUM) is None:  # make test installs Debian's chromium; a bare checkout must say so, loudly
    pytest.fail(f"{CHROMIUM} is missing: run `make test` (it apt-installs chromium) or apt-get install chromium",
                pytrace=False)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = write(tmp_path_factory.mktemp("browser") / "synthetic-1", build(Spec()))
    pool = load_pool([folder])
    judgement = judge(pool)
    page = folder / "report.html"
    page.write_text(render_html(judgement, pool, "synthetic"), encoding="utf-8")
    return page, render_markdown(judgement, pool.records, "synthetic")


def _spread(png: bytes) -> float:
    """How much the pixels vary (0 for a blank or single-colour image)."""
    image = Image.open(io.BytesIO(png)).convert("L")
    return float(ImageStat.Stat(image).stddev[0])


def test_the_report_renders_in_chromium_with_nothing_fetched_and_every_figure_drawn(report: tuple[Path, str]) -> None:
    path, markdown = report
    url = path.resolve().as_uri()
    errors: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900}, java_script_enabled=False)

            def route(request_route: "sync_api.Route") -> None:
                requests.append(request_route.request.url)
                if request_route.request.url == url:
                    request_route.continue_()
                else:
                    request_route.abort()

            page.route("**/*", route)
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
            page.goto(url, wait_until="load")
            figures = page.locator("figure.plot")
            count = figures.count()
            spreads = []
            for index in range(count):
                drawing = figures.nth(index).locator(":scope > svg")  # the drawing alone, not its caption
                drawing.scroll_into_view_if_needed()
                box = drawing.bounding_box()
                assert box is not None and box["width"] > 300 and box["height"] > 100, (index, box)
                spreads.append(_spread(drawing.screenshot()))
            cells = page.locator("#verdict-table tbody tr").all()
            shown = [[td.inner_text().strip() for td in row.locator("td").all()] for row in cells]
        finally:
            browser.close()
    assert errors == []
    assert requests == [url]
    wedges = sum(r["outcome"] == "wedge" for r in load_pool([path.parent]).records)
    assert count == 4 + wedges  # forest, timeline, phases, time to wedge, and one per wedge
    assert all(s > 5.0 for s in spreads), spreads
    assert shown == markdown_verdicts(markdown)
