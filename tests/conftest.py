"""Shared test settings: CUDA tests run only where CUDA exists (``make gpu``).

With ``ICML26_REQUIRE_CUDA=1`` (``make gpu``, ``make gpu-check``) a ``cuda`` test that would be
skipped fails instead, and a session that selected no ``cuda`` test at all fails too: a GPU step
must never pass by testing nothing.
"""

from __future__ import annotations

import os

import pytest
import torch

REQUIRE_CUDA = "ICML26_REQUIRE_CUDA"


def _require_cuda() -> bool:
    return os.environ.get(REQUIRE_CUDA, "").strip().lower() not in ("", "0", "false", "no")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    if _require_cuda():
        return  # pytest_runtest_setup fails them
    skip = pytest.mark.skip(reason="needs a CUDA device (run by make gpu)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item):
    if "cuda" in item.keywords and _require_cuda() and not torch.cuda.is_available():
        pytest.fail(f"needs a CUDA device, and {REQUIRE_CUDA}=1 forbids skipping it (no CUDA device is visible)",
                    pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and "cuda" in item.keywords and _require_cuda():
        report.outcome = "failed"  # a cuda test that skipped itself
        report.longrepr = f"a cuda test was skipped although {REQUIRE_CUDA}=1: {report.longrepr}"


def pytest_sessionfinish(session, exitstatus):
    selected = sum("cuda" in item.keywords for item in getattr(session, "items", []))
    if _require_cuda() and selected == 0 and exitstatus in (0, 5):
        print(f"\n{REQUIRE_CUDA}=1 but no cuda test was selected")
        session.exitstatus = 1


@pytest.fixture(scope="module")
def one_thread():
    """Run a module's tests with one intra-op thread: on tiny tensors extra threads only spin-wait."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
