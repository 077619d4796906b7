"""The one headless Chromium setup the browser tests share (the website's and JupyterLab's).

Debian's chromium and chromium-driver (``apt-get install chromium chromium-driver``), driven by
Selenium, with every host but this machine's loopback unreachable. Without them a browser test
skips with a one-line reason, or fails where ``COURSE_SITE_TESTS=required`` (CI's ``.ci/run``).
"""

import os

import pytest

from course_utils.tools.doctor import find_browser

CHROMIUM, DRIVER = find_browser()
BROWSER_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
    # Every host but this machine's loopback is unreachable: a CDN script or font would fail.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
NO_BROWSER = (
    "no headless browser: install Debian's chromium and chromium-driver "
    "(apt-get install chromium chromium-driver) to run the browser tests"
)


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``, or fail where CI requires the browser tests to run."""
    if os.environ.get("COURSE_SITE_TESTS") == "required":
        pytest.fail(reason)
    pytest.skip(reason)


def chrome(profile, logs: bool = False):
    """A headless Chromium under Selenium with its profile in ``profile`` (quit it after use);
    skips (or fails) with the reason when there is no browser."""
    if not (CHROMIUM and DRIVER):
        skip_or_fail(NO_BROWSER)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in BROWSER_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    if logs:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    driver.set_script_timeout(30)
    return driver
