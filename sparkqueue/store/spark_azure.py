"""Spark on Azure beside the native engine: Hadoop's ABFS client configured from delta-rs's Azure
storage options, for roots both engines read and write (`abfss://container@account.dfs.core.
windows.net/prefix`; `abfs://` over plain HTTP, as to the Azurite emulator).

Delta's default log store for these schemes (`AzureLogStore`) writes `N.json` under a temporary
name and renames it into place, and ABFS's rename never replaces an existing file: on the Blob
endpoint it is a copy sent with `If-None-Match: *`, on the DFS endpoint an atomic rename. delta-rs
commits a version with a put sent with the same condition. So Azure itself refuses a second writer
of a version, whichever engine it is, as on S3 with the conditional log store (spark_s3.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

from ..errors import InvalidParameterValue

AZURE_SCHEMES = ("abfs", "abfss")
# Delta's log stores that commit by a rename that never replaces a file (its default on Azure).
RENAMING_LOG_STORES = ("io.delta.storage.AzureLogStore",
                       "org.apache.spark.sql.delta.storage.AzureLogStore",
                       "org.apache.spark.sql.delta.storage.DelegatingLogStore")  # fmt: skip
DFS_HOST = "dfs.core.windows.net"
# delta-rs's (object_store's) names for each setting, the first its documented one; keys are read
# in any case, and from the environment where storage_options leave them out, as delta-rs does.
ACCOUNT = ("AZURE_STORAGE_ACCOUNT_NAME", "ACCOUNT_NAME")
KEY = ("AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY", "AZURE_STORAGE_MASTER_KEY",
       "ACCOUNT_KEY", "ACCESS_KEY", "MASTER_KEY")  # fmt: skip
SAS = ("AZURE_STORAGE_SAS_KEY", "AZURE_STORAGE_SAS_TOKEN", "SAS_KEY", "SAS_TOKEN")
CLIENT_ID = ("AZURE_CLIENT_ID", "AZURE_STORAGE_CLIENT_ID", "CLIENT_ID")
CLIENT_SECRET = ("AZURE_CLIENT_SECRET", "AZURE_STORAGE_CLIENT_SECRET", "CLIENT_SECRET")
TENANT = ("AZURE_TENANT_ID", "AZURE_STORAGE_TENANT_ID", "AZURE_AUTHORITY_ID", "TENANT_ID")
EMULATOR = ("AZURE_STORAGE_USE_EMULATOR", "USE_EMULATOR")
ENDPOINT = ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT", "ENDPOINT")
TRUE = ("true", "1", "yes", "y", "on")
EMULATOR_URL = "AZURITE_BLOB_STORAGE_URL"  # where delta-rs finds the emulator (environment only)
EMULATOR_DEFAULT = "http://127.0.0.1:10000"
# Spark leaves settings whose names match its redaction pattern out of its UI, event logs and
# logged configuration; its default pattern misses ABFS's shared-key setting.
REDACTION_KEY = "spark.redaction.regex"
REDACTION = r"(?i)secret|password|token|access[.]?key|account[.]key"
# The ABFS file systems hadoop-azure ships (Databricks ships its own fork, unchecked here).
STOCK_FILE_SYSTEMS = ("org.apache.hadoop.fs.azurebfs.AzureBlobFileSystem",
                      "org.apache.hadoop.fs.azurebfs.SecureAzureBlobFileSystem")  # fmt: skip


def azure_packages(hadoop_version: str) -> tuple[str, ...]:
    """Hadoop's ABFS client, of the Hadoop that Spark ships (a connector must match its Hadoop;
    the Blob endpoint, and so Azurite, needs 3.5's)."""
    return (f"org.apache.hadoop:hadoop-azure:{hadoop_version}",)


def azure_settings(storage_options: Mapping[str, str] | None) -> dict[str, str]:
    """Spark settings for `abfs(s)://` roots from delta-rs's Azure keys (given, else from the
    environment): the account's shared key, else a service principal, else a SAS token (in
    delta-rs's order, so both engines act as one identity), and Azurite's address where the
    emulator is asked for. Empty when no account is named: the session is then not set up for
    Azure. Other credentials (managed identities, bearer tokens) are ABFS's own settings."""
    found = _options(storage_options)
    account = found.get("account")
    if account is None:
        return {}
    host = f"{account}.{DFS_HOST}"
    settings = {
        # The JDK's HTTP client: ABFS's default one needs an SSL socket factory it does not
        # build for plain HTTP (the emulator), and fails at start without it.
        "spark.hadoop.fs.azure.networking.library": "JDK_HTTP_URL_CONNECTION",
        REDACTION_KEY: REDACTION,
    }
    prefix = "spark.hadoop.fs.azure.account"
    if "key" in found:
        settings[f"{prefix}.key.{host}"] = found["key"]
    elif {"client_id", "client_secret", "tenant"} <= found.keys():
        settings.update(
            {
                f"{prefix}.auth.type.{host}": "OAuth",
                f"{prefix}.oauth.provider.type.{host}":
                    "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider",
                f"{prefix}.oauth2.client.id.{host}": found["client_id"],
                f"{prefix}.oauth2.client.secret.{host}": found["client_secret"],
                f"{prefix}.oauth2.client.endpoint.{host}":
                    f"https://login.microsoftonline.com/{found['tenant']}/oauth2/token",
            }
        )  # fmt: skip
    elif "sas" in found:
        settings[f"{prefix}.auth.type.{host}"] = "SAS"
        settings["spark.hadoop.fs.azure.sas.fixed.token." + host] = found["sas"].removeprefix("?")
    if found.get("emulator", "").lower() in TRUE:
        # ABFS reaches an emulator as IP:PORT, the account in the path, over the Blob API alone
        # (Azurite has no namespace); delta-rs reads the address from the environment only.
        address = urlsplit(os.environ.get(EMULATOR_URL) or EMULATOR_DEFAULT)
        settings["spark.hadoop.fs.azure.abfs.endpoint"] = f"{address.hostname}:{address.port}"
        settings["spark.hadoop.fs.azure.always.use.https"] = "false"
        settings["spark.hadoop.fs.azure.account.hns.enabled"] = "false"
        settings["spark.hadoop.fs.azure.fns.account.service.type"] = "BLOB"
    elif "endpoint" in found:
        raise InvalidParameterValue(
            "Spark's ABFS client reaches an Azure account at the root's own host"
            " (abfss://container@account.dfs.core.windows.net/...) and takes no other endpoint"
            " but an emulator's; leave AZURE_STORAGE_ENDPOINT out of storage_options and the"
            " environment for a root both engines write, or set AZURE_STORAGE_USE_EMULATOR"
        )
    return settings


def _options(storage_options: Mapping[str, str] | None) -> dict[str, str]:
    """delta-rs's Azure keys by what they say: given ones first, then the environment's."""
    given = {key.upper(): str(value) for key, value in (storage_options or {}).items()}
    names = {"account": ACCOUNT, "key": KEY, "sas": SAS, "client_id": CLIENT_ID,
             "client_secret": CLIENT_SECRET, "tenant": TENANT, "emulator": EMULATOR,
             "endpoint": ENDPOINT}  # fmt: skip
    found = {}
    for meaning, keys in names.items():
        value = next((given[key] for key in keys if given.get(key)), None)
        from_environment = (os.environ.get(key) for key in keys if key.startswith("AZURE"))
        value = value or next((each for each in from_environment if each), None)
        if value:
            found[meaning] = value
    return found


def renames_conditionally(log_store: str | None, file_system: str | None) -> bool:
    """Whether Delta commits `abfs(s)://` tables with this log store (None: Delta's default) on
    this ABFS file system (None: hadoop-azure's) by a rename that never replaces a version, which
    delta-rs's conditional puts can commit beside. Never on Databricks, whose runtime ships its
    own Delta and ABFS."""
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return False
    stock = file_system is None or file_system in STOCK_FILE_SYSTEMS
    return stock and (log_store is None or log_store in RENAMING_LOG_STORES)
