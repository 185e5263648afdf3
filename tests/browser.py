"""Headless Chromium for the console's browser tests: Debian's package, installed by the tests
where it is missing (as CI needs it; a test tool's own browser download is refused on this
network), driven by Playwright's Python client with the flags a closed network needs.

The install starts when the run is collected (tests/conftest.py), so its download overlaps the
tests before the browser's, which run last among the unit tests."""

from __future__ import annotations

import os
import shutil
import subprocess

CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialling Google's hosts, which this
# network refuses; as root it needs --no-sandbox.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL = "apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium"
INSTALL_SECONDS = 900


class ChromiumInstall:
    """Debian's Chromium, being installed in the background if it is not there yet."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        if not os.path.exists(CHROMIUM):
            sudo = "" if os.geteuid() == 0 else f"{shutil.which('sudo') or 'sudo'} -n "
            self._process = subprocess.Popen(
                ["bash", "-c", INSTALL.replace("apt-get", f"{sudo}apt-get")],
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )

    def path(self) -> str:
        """Chromium's path once installed; AssertionError saying why if it could not be."""
        if self._process is not None:
            _, errors = self._process.communicate(timeout=INSTALL_SECONDS)
            assert self._process.returncode == 0, f"installing chromium failed: {errors[-2000:]!r}"
        assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing after its install"
        return CHROMIUM
