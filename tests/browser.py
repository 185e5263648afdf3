"""Headless Chromium for the console's browser tests: Debian's package, installed here on first
need (as CI needs it; a test tool's own browser download is refused on this network), driven by
Playwright's Python client with the flags a closed network needs."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

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
INSTALL_LOCK = Path("/tmp/sparkqueue-chromium-install.lock")


def chromium() -> str:
    """The path of Debian's Chromium, installed with apt-get if it is not there yet."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    with INSTALL_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(CHROMIUM):
            sudo = [] if os.geteuid() == 0 else [shutil.which("sudo") or "sudo", "-n"]
            environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            for step in (
                ["update", "-qq"],
                ["install", "-y", "-qq", "--no-install-recommends", "chromium"],
            ):
                subprocess.run([*sudo, "apt-get", *step], check=True, env=environment, timeout=900)
    return CHROMIUM
