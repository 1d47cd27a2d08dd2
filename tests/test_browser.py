"""The rendered smoke book in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) visits every page of ``_build/html-smoke`` served from localhost and fails on
a JavaScript console error, an image that does not load or whose alt text is missing or a file
name, math that MathJax left unrendered, TeX in the page's ``<title>``, its navigation links or
its cards (and in every link of the landing and ledger pages), a notebook page without its download
button, or an exercise solution that does not open.

The site ships its own MathJax (``_static/mathjax``, see :func:`icml26.book.site.ship_mathjax`)
and every other host is unreachable (an unresolvable DNS and a dead proxy), so the test needs no
network and fails when a page still reaches for a CDN. A second test opens pages from disk
(``file://``, as the README tells a reader to) and finds their math rendered and nothing fetched
from a network. They run in ``make test``'s unit step after the smoke build; without the build (or
the browser) they skip, except under ``CI=true``, where they fail. ``ICML26_SITE`` points them at
another built site.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("ICML26_SITE") or ROOT / "_build" / "html-smoke")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SKIP_PAGES = {"genindex.html", "search.html"}
# pages whose every link must be plain text (a notebook title with math is copied there)
ALL_LINKS_PLAIN = {"intro.html", "front/ledger.html", "front/teachers.html"}

pytestmark = pytest.mark.browser


def _need(condition: bool, why: str) -> None:
    if condition:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why} (CI must run the browser test)")
    pytest.skip(why)


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass


@pytest.fixture(scope="module")
def server():
    _need((SITE / "index.html").exists(), f"no smoke build at {SITE} (run: python -m icml26.book build --scale smoke)")
    handler = functools.partial(_Handler, directory=str(SITE))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    _need(Path(CHROMIUM).exists() and Path(DRIVER).exists(),
          "Chromium is not installed (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # no network: no name resolves but localhost's, and any other address goes to a dead proxy
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    yield driver
    driver.quit()


def _pages() -> list[str]:
    if not SITE.is_dir():
        return []
    out = []
    for page in sorted(SITE.rglob("*.html")):
        rel = page.relative_to(SITE).as_posix()
        if rel.startswith(("_", "genindex")) or rel in SKIP_PAGES:
            continue
        if "http-equiv=\"refresh\"" in page.read_text(encoding="utf-8", errors="ignore")[:2000]:
            continue  # the redirect at index.html
        out.append(rel)
    return out


PAGES = _pages()

_WAIT_MATHJAX = """
const done = arguments[arguments.length - 1];
const start = Date.now();
(function wait() {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    MathJax.startup.promise.then(() => done('ok')).catch(e => done('error: ' + e));
  } else if (!document.querySelector('script[src*="tex-mml-chtml"]')) {
    done('none');
  } else if (document.readyState === 'complete' && Date.now() - start > 2000) {
    done('not loaded');  // a deferred script that loaded has run before the load event
  } else if (Date.now() - start > 30000) {
    done('timeout');
  } else { setTimeout(wait, 50); }
})();
"""

_RAW_MATH = """
const article = document.querySelector('article') || document.body;
const copy = article.cloneNode(true);
copy.querySelectorAll('pre, code, mjx-container, script, style, .highlight, .cell_input, .output')
    .forEach(e => e.remove());
return copy.textContent;
"""

_IMAGES = """
return Array.from(document.querySelectorAll('article img')).map(img => ({
  src: img.getAttribute('src'), alt: (img.getAttribute('alt') || '').trim(),
  ok: img.complete && img.naturalWidth > 0}));
"""


# what a reader sees as text where MathJax does not run: the tab title, navigation links, cards
_PLAIN_TEXTS = """
const everyLink = arguments[0];
const sel = ['nav.bd-docs-nav a', '.prev-next-area a', '.bd-breadcrumbs a', '.sd-card-title', '.sd-card-text',
             '.sd-card a', '.sd-card-footer'];
if (everyLink) sel.push('article a');
const out = [{what: '<title>', text: document.title, math: false}];
for (const el of document.querySelectorAll(sel.join(', '))) {
  if (el.closest('h1, h2, h3, h4, h5, h6')) continue;  // a heading's own anchor
  out.push({what: el.matches('a') ? 'link ' + (el.getAttribute('href') || '') : 'card text',
            text: el.textContent.replace(/\\s+/g, ' ').trim(),
            math: !!el.querySelector('mjx-container, .math')});
}
return out;
"""
_TEX = re.compile(r"\$|\\[()\[\]]|\\[A-Za-z]+")
_FILE_LIKE = re.compile(r"\S*[/\\]\S*|\S+\.(png|jpe?g|gif|svg|webp|pdf)|[0-9a-f]{32,}(\.\w+)?", re.I)


def tex_in_plain_text(text: str) -> str | None:
    """The first TeX delimiter or command in a text that should be plain (None when clean)."""
    match = _TEX.search(text)
    return match.group(0) if match else None


def alt_problem(alt: str) -> str | None:
    """Why an image's alt text fails a reader: missing, or a file name or path (docutils writes
    the image's URI when a figure has no alt text)."""
    alt = alt.strip()
    if not alt:
        return "no alt text"
    if _FILE_LIKE.fullmatch(alt):
        return f"alt text is a file name: {alt[:80]!r}"
    return None


def test_plain_text_and_alt_rules():
    assert tex_in_plain_text("Counting privacy at the same (ε,δ)") is None
    assert tex_in_plain_text("at the same \\((\\varepsilon,\\delta)\\)") == "\\("
    assert tex_in_plain_text("at the same $(\\varepsilon,\\delta)$") == "$"
    assert tex_in_plain_text("choosing \\gamma") == "\\gamma"
    assert alt_problem("../../_images/3176cff2a1b2c3d4e5f60718293a4b5c6d7e8f90.png")
    assert alt_problem("3176cff2a1b2c3d4e5f60718293a4b5c6d7e8f90") and alt_problem("plot.png") and alt_problem(" ")
    assert alt_problem("Exact accuracy against fresh rollouts, mean over seeds.") is None
    assert alt_problem("Error of 1/n against n (log-log).") is None


def _visit(driver, url: str) -> str:
    driver.get(url)
    return driver.execute_async_script(_WAIT_MATHJAX)


def _plain_text_problems(driver, rel: str) -> list[str]:
    problems = []
    for item in driver.execute_script(_PLAIN_TEXTS, rel in ALL_LINKS_PLAIN):
        token = tex_in_plain_text(item["text"])
        if token or item["math"]:
            problems.append(f"{rel}: TeX in {item['what']} ({token or 'math'}): {item['text'][:100]!r}")
    return problems


@pytest.mark.skipif(not PAGES and os.environ.get("CI", "").lower() != "true", reason="no smoke build")
def test_every_page_renders_cleanly_in_chromium(server, browser):
    assert PAGES, f"no pages under {SITE}"
    start = time.perf_counter()
    problems: list[str] = []
    notebooks = {p.relative_to(SITE / "_sources").with_suffix("").with_suffix(".html").as_posix()
                 for p in (SITE / "_sources").rglob("*.ipynb")}
    browser.get_log("browser")  # drop anything logged before the first page
    for rel in PAGES:
        status = _visit(browser, f"{server}/{rel}")
        if status not in ("ok", "none"):
            problems.append(f"{rel}: MathJax did not finish ({status})")
        for entry in browser.get_log("browser"):
            # the browser's own request for /favicon.ico is not the page's doing
            if entry.get("level") == "SEVERE" and "favicon.ico" not in entry.get("message", ""):
                problems.append(f"{rel}: console error: {entry.get('message', '')[:200]}")
        for img in browser.execute_script(_IMAGES):
            if not img["ok"]:
                problems.append(f"{rel}: image does not load: {img['src']}")
            if why := alt_problem(img["alt"]):
                problems.append(f"{rel}: image {img['src']}: {why}")
        problems += _plain_text_problems(browser, rel)
        text = browser.execute_script(_RAW_MATH)
        for token in ("$$", "\\(", "\\[", "\\begin{"):
            if token in text:
                at = text.index(token)
                problems.append(f"{rel}: unrendered math {token!r} near {text[max(0, at - 40):at + 40]!r}")
        if rel in notebooks:
            links = browser.execute_script(
                "return Array.from(document.querySelectorAll('a')).map(a => a.getAttribute('href') || '')"
                ".filter(h => h.endsWith('.ipynb')).length")
            if not links:
                problems.append(f"{rel}: notebook page without the .ipynb download button")
        problems += [f"{rel}: {p}" for p in _solutions_open(browser)]
    seconds = time.perf_counter() - start
    print(f"\nbrowser test: {len(PAGES)} pages, {len(SOLUTIONS_CLICKED)} solutions opened, in {seconds:.1f} s")
    if not SOLUTIONS_CLICKED:
        problems.append("no exercise solution found on any page (the check would be vacuous)")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:60])


def _solutions_open(driver) -> list[str]:
    """Click every collapsed solution's toggle; its body must become visible."""
    from selenium.webdriver.common.by import By

    problems = []
    solutions = driver.find_elements(By.CSS_SELECTOR, ".solution.dropdown, details.solution")
    for i, sol in enumerate(solutions):
        label = sol.get_attribute("id") or f"solution {i + 1}"
        if sol.tag_name == "details":
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", sol)
            sol.find_element(By.CSS_SELECTOR, "summary").click()
            time.sleep(0.05)
            if not driver.execute_script("return arguments[0].open", sol):
                problems.append(f"{label}: the solution does not open")
            continue
        buttons = sol.find_elements(By.CSS_SELECTOR, "button.toggle-button, .toggle-button, summary")
        if not buttons:
            problems.append(f"{label}: a dropdown solution without a toggle")
            continue
        if driver.execute_script(_BODY_VISIBLE, sol):
            problems.append(f"{label}: the solution is shown before a click (not folded)")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", buttons[0])
        driver.execute_script("arguments[0].click();", buttons[0])
        time.sleep(0.05)
        if not driver.execute_script(_BODY_VISIBLE, sol):
            problems.append(f"{label}: the solution's body stays hidden after a click")
        SOLUTIONS_CLICKED.append(label)
    return problems


SOLUTIONS_CLICKED: list[str] = []
_BODY_VISIBLE = """
const b = arguments[0].querySelector('section, .solution-content, p:not(.admonition-title)');
return !!b && b.offsetHeight > 0 && getComputedStyle(b).visibility !== 'hidden';
"""


# -- offline, from disk ------------------------------------------------------------------------------
_FETCHED = """
const urls = performance.getEntriesByType('resource').map(e => e.name);
for (const el of document.querySelectorAll('script[src], link[rel="stylesheet"][href], img[src]'))
  urls.push(el.src || el.href);
return urls.filter(u => !/^(file|data|blob|about):/.test(u));
"""


def _math_pages(limit: int = 4) -> list[str]:
    """The ``limit`` pages with the most formulas, one a folder (a chapter, the front matter): the
    first test already sees every page render with the network blocked; this one the same from
    disk, where a path or a font that needs a server would fail."""
    best: dict[str, tuple[int, str]] = {}
    for rel in PAGES:
        count = (SITE / rel).read_text(encoding="utf-8", errors="ignore").count('class="math')
        folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
        if count and count > best.get(folder, (0, ""))[0]:
            best[folder] = (count, rel)
    return [rel for _, rel in sorted(best.values(), reverse=True)[:limit]]


@pytest.mark.skipif(not PAGES and os.environ.get("CI", "").lower() != "true", reason="no smoke build")
def test_pages_opened_from_disk_render_their_math_without_a_network(browser):
    """What the README promises: open ``index.html`` of the built site without a network (every
    host, the CDN included, unreachable) and read rendered formulas. MathJax comes from the
    site's own ``_static/mathjax``; no page asks a network for anything."""
    pages = _math_pages()
    assert pages, f"no page with math under {SITE}"
    start = time.perf_counter()
    problems: list[str] = []
    if not (SITE / "_static" / "mathjax" / "tex-mml-chtml.js").is_file():
        problems.append(f"{SITE} does not ship MathJax in _static/mathjax")
    browser.get_log("browser")
    for rel in pages:
        status = _visit(browser, (SITE / rel).resolve().as_uri())
        if status != "ok":
            problems.append(f"{rel}: MathJax did not run from disk ({status})")
            continue
        for url in browser.execute_script(_FETCHED):
            problems.append(f"{rel}: asks the network for {url[:120]}")
        text = browser.execute_script(_RAW_MATH)
        for token in ("$$", "\\(", "\\[", "\\begin{"):
            if token in text:
                at = text.index(token)
                problems.append(f"{rel}: raw TeX {token!r} near {text[max(0, at - 40):at + 40]!r}")
        if not browser.execute_script("return document.querySelectorAll('article mjx-container').length"):
            problems.append(f"{rel}: no formula rendered")
        for entry in browser.get_log("browser"):
            if entry.get("level") == "SEVERE" and "favicon.ico" not in entry.get("message", ""):
                problems.append(f"{rel}: console error: {entry.get('message', '')[:200]}")
    print(f"\noffline test: {len(pages)} pages from disk in {time.perf_counter() - start:.1f} s")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems[:60])
