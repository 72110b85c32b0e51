"""The page end to end in a real browser: ``python -m fastrag serve`` on a free port, headless Chromium.

Debian's ``chromium`` and ``chromium-driver`` drive it through Selenium (``.ci/run`` installs them). When
they are missing the test is skipped with the command that installs them, except under CI (``CI`` set,
as ``.ci/run`` does), where it fails: CI must run it. The answer comes
from the tiny random Qwen3 GGUF, so the test checks behaviour (results, streamed text, citations that
open their span), not wording.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import in_ci, running_server, write_repo
from fastrag.indexing.builder import build_index

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL_HINT = "install them with `apt-get install -y chromium chromium-driver` (.ci/run does)"
WAIT_S = 60


def browser_paths() -> tuple[Path, Path]:
    """The system Chromium and its driver; when either is missing, a skip, or a failure under CI."""
    browser = CHROMIUM if CHROMIUM.exists() else Path(shutil.which("chromium") or CHROMIUM)
    driver = CHROMEDRIVER if CHROMEDRIVER.exists() else Path(shutil.which("chromedriver") or CHROMEDRIVER)
    missing = [str(p) for p in (browser, driver) if not p.exists()]
    if missing:
        reason = f"{' and '.join(missing)} missing: {INSTALL_HINT}"
        if in_ci():
            pytest.fail(reason)
        pytest.skip(reason)
    return browser, driver


@pytest.fixture()
def server(tmp_path: Path, tiny_gguf: Path) -> Iterator[str]:
    """``python -m fastrag serve --port 0`` in a project holding the sample repository; yields its address."""
    write_repo(tmp_path / "data/raw/repo")
    build_index(tmp_path / "data/raw/repo", tmp_path / "data/processed", display_root="data/raw/repo", progress=False)
    with running_server(tmp_path, "--model", str(tiny_gguf)) as address:
        yield address


@pytest.fixture()
def browser() -> Iterator[Any]:
    """Headless Chromium driven by the system chromedriver, its console log recorded."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = str(binary)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1400", "--disable-extensions", "--no-first-run"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(driver_path)))
    try:
        yield driver
    finally:
        driver.quit()


def test_page_search_ask_and_open_a_citation(browser: Any, server: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, WAIT_S)
    browser.get(server + "/")
    wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")
    assert browser.title == "fastrag"

    # search: results appear with path, line range and a highlighted snippet
    query = browser.find_element(By.ID, "query")
    query.send_keys("How do I load a LoRA adapter with load_lora_adapter?")
    browser.find_element(By.ID, "k").clear()
    browser.find_element(By.ID, "k").send_keys("5")
    browser.find_element(By.ID, "search-button").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results li.result"))
    results = browser.find_elements(By.CSS_SELECTOR, "#results li.result")
    assert 1 <= len(results) <= 5
    paths = [r.find_element(By.CSS_SELECTOR, ".path").text for r in results]
    assert "data/raw/repo/pkg/engine.py" in paths and all(p.startswith("data/raw/repo/") for p in paths)
    engine = results[paths.index("data/raw/repo/pkg/engine.py")]
    assert "line" in engine.find_element(By.CSS_SELECTOR, ".where").text
    assert engine.find_elements(By.CSS_SELECTOR, "pre.code .line")
    keywords = {e.text for e in engine.find_elements(By.CSS_SELECTOR, ".tok-keyword")}
    assert {"def", "class"} & keywords, keywords
    assert "results in" in browser.find_element(By.ID, "status").text

    # ask: the answer streams in, then its cited sources
    browser.find_element(By.ID, "ask-button").click()
    answer = browser.find_element(By.ID, "answer")
    wait.until(lambda d: answer.get_attribute("data-state") in ("done", "error"))
    assert answer.get_attribute("data-state") == "done", browser.find_element(By.ID, "status").text
    assert int(answer.get_attribute("data-pieces") or 0) >= 1, "no streamed text event arrived"
    assert answer.text.strip()
    citations = answer.find_elements(By.CSS_SELECTOR, "a.citation")
    assert citations and citations[0].text.startswith("[data/raw/repo/")
    assert browser.find_elements(By.CSS_SELECTOR, "#cited a.citation")

    # a citation opens its whole retrieved span, with its line numbers
    cited = citations[0].text.strip("[]")
    citations[0].click()
    dialog = browser.find_element(By.ID, "span-dialog")
    wait.until(
        lambda d: dialog.get_attribute("open") is not None and d.find_elements(By.CSS_SELECTOR, "#span-code .line")
    )
    assert browser.find_element(By.ID, "span-title").text == cited.rsplit(":", 1)[0]
    assert "line" in browser.find_element(By.ID, "span-where").text
    start, end = (int(n) for n in cited.rsplit(":", 1)[1].split("-"))
    expected = (tmp_path / cited.rsplit(":", 1)[0]).read_text(encoding="utf-8")[start:end]
    shown = browser.find_element(By.ID, "span-code").get_attribute("textContent")
    assert expected.strip() and expected.strip() in shown  # the whole retrieved span, the cited text in it

    shot = tmp_path / "page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    browser.find_element(By.ID, "span-close").click()
    assert dialog.get_attribute("open") is None

    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors  # a blocked asset or script error (the content security policy allows only 'self')


#: Markup that would run if the page ever inserted text as HTML; each records itself in ``window.pwned``.
RUN = "(window.pwned=window.pwned||[]).push"
PAYLOADS = [
    f"<img src=x onerror={RUN}('img')>",
    f"<script>{RUN}('script')</script>",
    f"</pre><svg onload={RUN}('svg')>",
    f"<a href=\"javascript:{RUN}('link')\">docs</a> [docs](javascript:{RUN}('md-link'))",
]
#: A file name holding the same markup (no ``/`` can be in a name: the closing tags stay in the text).
EVIL_NAME = f"xsscanary <img src=x onerror={RUN}('name-img')> <script>{RUN}('name-script')<script> javascript:x.md"


def test_page_shows_markup_in_files_as_text_and_runs_none_of_it(tmp_path: Path, browser: Any) -> None:
    """A file whose text and name hold HTML and script payloads: results and span show them verbatim, nothing runs.

    The server is bound off loopback, so the page also proves it passes the token it was opened with.
    """
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    repo = tmp_path / "data/raw/repo"
    text = "# xsscanary payloads\n\n" + "\n\n".join(PAYLOADS) + "\n"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / EVIL_NAME).write_text(text, encoding="utf-8")
    build_index(repo, tmp_path / "data/processed", display_root="data/raw/repo", progress=False)
    path = f"data/raw/repo/docs/{EVIL_NAME}"
    token = "page-token-0123456789"
    wait = WebDriverWait(browser, WAIT_S)
    with running_server(tmp_path, "--host", "0.0.0.0", "--token", token) as address:
        browser.get(f"{address}/?token={token}")
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")
        browser.find_element(By.ID, "query").send_keys("xsscanary payloads img script svg javascript")
        browser.find_element(By.ID, "search-button").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results li.result"))
        (result,) = browser.find_elements(By.CSS_SELECTOR, "#results li.result")
        assert result.find_element(By.CSS_SELECTOR, ".path").text == path
        shown = result.find_element(By.CSS_SELECTOR, "pre.code").get_attribute("textContent")
        assert shown in (text, text.rstrip("\n"))

        result.find_element(By.CSS_SELECTOR, ".path").click()  # the whole file in the span dialog
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#span-code .line"))
        assert browser.find_element(By.ID, "span-title").text == path
        assert browser.find_element(By.ID, "span-code").get_attribute("textContent") in (text, text.rstrip("\n"))

        for payload in PAYLOADS:  # shown as typed, in both places
            assert payload in shown
        assert browser.execute_script("return window.pwned === undefined")  # not one handler, script or link ran
        injected = "img, svg, script:not([src]), iframe, object, a[href^='javascript:' i], [onerror], [onload]"
        assert not browser.find_elements(By.CSS_SELECTOR, injected)
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors  # a 401 or a script blocked by the content security policy would show here
