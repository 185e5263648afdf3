"""An Azure Blob Storage API for tests: Azurite (Microsoft's emulator, from the npm registry,
installed on first use under ~/.cache/sparkqueue), run as a process of its own. delta-rs speaks to
it as to Azure (`az://container/...`, the emulator's well-known account), and so does Spark's
ABFS client (Hadoop 3.5's, through the Blob endpoint: Azurite has no ADLS Gen2 DFS API)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.processes import free_port, stop, wait_for_port

AZURITE = "azurite@3.37.0"
INSTALL_DIR = Path.home() / ".cache" / "sparkqueue" / "azurite-3.37.0"
ACCOUNT = "devstoreaccount1"
# The emulator's published development key (not a secret: every Azurite has it).
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@dataclass(frozen=True)
class AzureServer:
    url: str

    @property
    def options(self) -> dict[str, str]:
        """delta-rs's keys for the emulator; the same names as environment variables (the
        emulator's address is read from the environment only: AZURITE_BLOB_STORAGE_URL)."""
        return {
            "AZURE_STORAGE_USE_EMULATOR": "true",
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": KEY,
            "AZURITE_BLOB_STORAGE_URL": self.url,
        }

    def new_container(self, form: str = "az") -> str:
        """A fresh, empty container; its URI in delta-rs's `az://container` form, or with
        `form="abfs"` in the `abfs://container@account.dfs.core.windows.net` form that Spark's
        ABFS client reads too (plain HTTP, as Azurite serves it)."""
        from azure.storage.blob import BlobServiceClient

        name = f"sparkqueue-{uuid.uuid4().hex[:12]}"
        connection = (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint={self.url}/{ACCOUNT};"
        )
        BlobServiceClient.from_connection_string(connection).create_container(name)
        return f"abfs://{name}@{ACCOUNT}.dfs.core.windows.net" if form == "abfs" else f"az://{name}"


def installed() -> Path:
    """Azurite's blob server command, installed with npm where it is missing."""
    command = INSTALL_DIR / "node_modules" / ".bin" / "azurite-blob"
    if not command.exists():
        npm = shutil.which("npm")
        assert npm is not None, "Azurite's tests need Node.js and npm"
        partial = Path(tempfile.mkdtemp(prefix="azurite-", dir=INSTALL_DIR.parent.as_posix()))
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(partial), AZURITE],
            check=True,
            capture_output=True,
            timeout=600,
        )
        try:
            partial.rename(INSTALL_DIR)  # whole, or not there: a concurrent install may win
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)
    return command


@contextmanager
def azurite_server() -> Iterator[AzureServer]:
    INSTALL_DIR.parent.mkdir(parents=True, exist_ok=True)
    command = installed()
    port = free_port()
    folder = tempfile.TemporaryDirectory(prefix="sparkqueue-azurite-")
    process = subprocess.Popen(
        [str(command), "--blobHost", "127.0.0.1", "--blobPort", str(port),
         "--location", folder.name, "--skipApiVersionCheck", "--loose", "--silent"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )  # fmt: skip
    try:
        wait_for_port(process, port, "Azurite")
        yield AzureServer(f"http://127.0.0.1:{port}")
    finally:
        stop(process, timeout=10)
        folder.cleanup()
