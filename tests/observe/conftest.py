"""Headless Chromium for the report and live-page tests (installed from Debian packages if missing)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _find() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


_NO_CHROMIUM = (
    "headless Chromium is not installed and could not be installed here "
    "(needs root and apt-get with the Debian package 'chromium')"
)


@pytest.fixture(scope="session")
def chromium_if_any() -> str | None:
    """Chromium's path, installed from Debian's packages if missing and possible; else None, so that a
    test checks everything else and skips only its rendering."""
    path = _find()
    if path is None and os.geteuid() == 0 and shutil.which("apt-get"):
        cmd = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if subprocess.run(cmd, capture_output=True, env=env).returncode != 0:
            subprocess.run(["apt-get", "update"], capture_output=True, env=env)
            subprocess.run(cmd, capture_output=True, env=env)
        path = _find()
    return path


@pytest.fixture(scope="session")
def chromium(chromium_if_any) -> str:
    if chromium_if_any is None:
        pytest.skip(_NO_CHROMIUM)
    return chromium_if_any


def skip_rendering(chromium_path: str | None) -> None:
    """Called once a test's other checks have passed: without Chromium, only the rendering is skipped."""
    if chromium_path is None:
        pytest.skip(f"rendering only: {_NO_CHROMIUM}")


def render(chromium: str, url: str, screenshot: Path | None = None, budget_ms: int = 4000) -> str:
    """The DOM after the page's scripts ran (and optionally a full-page screenshot)."""
    base = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--virtual-time-budget={budget_ms}",
    ]
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [*base, "--window-size=1280,3000", f"--screenshot={screenshot}", url],
            capture_output=True,
            timeout=120,
            check=True,
        )
    r = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True)
    return r.stdout
