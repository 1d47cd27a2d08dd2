"""The rendered smoke book in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) visits every page of ``_build/html-smoke`` served from localhost and fails on
a JavaScript console error, an image that does not load or has no alt text, math that MathJax left
unrendered, a notebook page without its download button, or an exercise solution that does not open.

MathJax is served from the ``django-static-mathjax`` package (MathJax 3), in place of the CDN URL,
and every other host is unreachable, so the test needs no network. It runs in ``make test``'s unit
step after the smoke build; without the build (or the browser) it skips, except under ``CI=true``,
where it fails.
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
SITE = ROOT / "_build" / "html-smoke"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
MATHJAX_CDN = re.compile(r"https://cdn\.jsdelivr\.net/npm/mathjax@3/es5/")
MATHJAX_LOCAL = "/__mathjax__/"
SKIP_PAGES = {"genindex.html", "search.html"}

pytestmark = pytest.mark.browser


def _need(condition: bool, why: str) -> None:
    if condition:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why} (CI must run the browser test)")
    pytest.skip(why)


def _mathjax_dir() -> Path | None:
    try:
        import mathjax  # django-static-mathjax
    except ImportError:
        return None
    folder = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    return folder if (folder / "tex-mml-chtml.js").exists() else None


class _Handler(http.server.SimpleHTTPRequestHandler):
    mathjax: Path

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):  # noqa: N802 (http.server's name)
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path.startswith(MATHJAX_LOCAL):
            target = (self.mathjax / path[len(MATHJAX_LOCAL):]).resolve()
            return self._send(target, "application/javascript" if target.suffix == ".js" else None)
        if path.endswith("/"):
            path += "index.html"
        target = (Path(self.directory) / path.lstrip("/")).resolve()
        if target.suffix == ".html" and target.is_file():
            text = MATHJAX_CDN.sub(MATHJAX_LOCAL, target.read_text(encoding="utf-8"))
            return self._send_bytes(text.encode(), "text/html; charset=utf-8")
        return super().do_GET()

    def _send(self, target: Path, ctype: str | None):
        if not target.is_file():
            self.send_error(404)
            return None
        return self._send_bytes(target.read_bytes(), ctype or self.guess_type(str(target)))

    def _send_bytes(self, body: bytes, ctype: str):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server():
    _need((SITE / "index.html").exists(), f"no smoke build at {SITE} (run: python -m icml26.book build --scale smoke)")
    mathjax = _mathjax_dir()
    _need(mathjax is not None, "MathJax is not installed (pip install django-static-mathjax)")
    handler = functools.partial(type("H", (_Handler,), {"mathjax": mathjax}), directory=str(SITE))
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
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):
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


def _visit(driver, url: str) -> str:
    driver.get(url)
    return driver.execute_async_script(_WAIT_MATHJAX)


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
            if not img["alt"] or re.fullmatch(r"[0-9a-f]{32,}(\.\w+)?", img["alt"]):
                problems.append(f"{rel}: image without alt text: {img['src']}")
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
