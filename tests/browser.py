"""Headless Chromium for the console's browser tests: Debian's package, installed by the tests
where it is missing (as CI needs it; a test tool's own browser download is refused on this
network), driven by Playwright's Python client with the flags a closed network needs.

The install starts when the run is collected (tests/conftest.py), so its download overlaps the
tests before the browser's, which run last among the unit tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile

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
# Waiting for dpkg's lock rather than failing on it (another run, or the machine's own updates).
APT = "apt-get -o DPkg::Lock::Timeout=300"
INSTALL = f"{APT} update -qq && {APT} install -y -qq --no-install-recommends chromium"
INSTALL_SECONDS = 540  # within pytest-timeout's 600 s for the test that waits


class ChromiumInstall:
    """Debian's Chromium, being installed in the background if it is not there yet."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        if not os.path.exists(CHROMIUM):
            sudo = "" if os.geteuid() == 0 else f"{shutil.which('sudo') or 'sudo'} -n "
            self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (the install outlives this call)
            self._process = subprocess.Popen(
                ["bash", "-c", INSTALL.replace("apt-get ", f"{sudo}apt-get ")],
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                stdout=subprocess.DEVNULL,
                stderr=self._errors,  # a file: no pipe to break when the run ends first
                start_new_session=True,  # a Ctrl-C of the run does not cut dpkg short
            )

    def path(self) -> str:
        """Chromium's path once installed; AssertionError saying why if it could not be."""
        if self._process is not None:
            try:
                self._process.wait(timeout=INSTALL_SECONDS)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"installing chromium took over {INSTALL_SECONDS} s") from None
            self._errors.seek(0)
            errors = self._errors.read()[-2000:]
            assert self._process.returncode == 0, f"installing chromium failed: {errors!r}"
        assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing after its install"
        return CHROMIUM

    def stop(self) -> None:
        """At the run's end: an install still running (the run stopped before the browser
        tests) is given a minute, then left to finish on its own; cut short, it would leave
        dpkg half-done for every later install."""
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=60)
