"""Spark's Azure (ABFS) settings from delta-rs's storage options, and which log stores let the
native engine commit beside Spark there (JVM-free: the settings are plain values;
tests/integration/test_azure_engines.py runs them against Azurite)."""

from __future__ import annotations

import re

import pytest

from sparkqueue.errors import InvalidParameterValue
from sparkqueue.store.spark_azure import azure_settings
from sparkqueue.store.spark_s3 import commits_conditionally

HOST = "acct.dfs.core.windows.net"


@pytest.fixture(autouse=True)
def no_azure_environment(monkeypatch):
    """Settings from the options alone, unless a test sets the environment itself."""
    import os

    for name in [name for name in os.environ if name.startswith("AZUR")]:
        monkeypatch.delenv(name)


def test_no_account_named_leaves_the_session_without_azure():
    assert not any("account.key" in key for key in azure_settings({}))


def test_a_shared_key_in_delta_rs_names_is_abfs_account_key():
    settings = azure_settings({"azure_storage_account_name": "acct", "account_key": "k=="})
    assert settings[f"spark.hadoop.fs.azure.account.key.{HOST}"] == "k=="
    assert settings["spark.hadoop.fs.azure.networking.library"] == "JDK_HTTP_URL_CONNECTION"
    assert "spark.hadoop.fs.azure.abfs.endpoint" not in settings  # Azure's own


def test_a_service_principal_or_a_sas_token_instead_of_a_key_in_delta_rs_order():
    sas = azure_settings({"AZURE_STORAGE_ACCOUNT_NAME": "acct", "SAS_KEY": "?sv=1&sig=x"})
    assert sas[f"spark.hadoop.fs.azure.account.auth.type.{HOST}"] == "SAS"
    assert sas[f"spark.hadoop.fs.azure.sas.fixed.token.{HOST}"] == "sv=1&sig=x"
    principal = {
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
        "AZURE_CLIENT_ID": "app",
        "AZURE_CLIENT_SECRET": "secret",
        "AZURE_TENANT_ID": "tenant",
    }
    both = azure_settings({**principal, "AZURE_STORAGE_SAS_KEY": "sv=1"})  # delta-rs: principal
    assert both[f"spark.hadoop.fs.azure.account.auth.type.{HOST}"] == "OAuth"
    assert both[f"spark.hadoop.fs.azure.account.oauth2.client.id.{HOST}"] == "app"
    assert both[f"spark.hadoop.fs.azure.account.oauth2.client.endpoint.{HOST}"] == (
        "https://login.microsoftonline.com/tenant/oauth2/token"
    )
    assert not any("sas" in key for key in both)


def test_every_credential_setting_is_one_spark_redacts():
    settings = azure_settings(
        {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ACCOUNT_KEY": "k"}
    )
    pattern = re.compile(settings["spark.redaction.regex"])
    secret = [key for key in settings if "key" in key or "secret" in key or "token" in key]
    assert secret and all(pattern.search(key) for key in secret)
    assert not pattern.search("spark.hadoop.fs.azure.abfs.endpoint")


def test_the_emulator_is_reached_over_http_on_its_blob_endpoint(monkeypatch):
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:10999")  # delta-rs reads it
    settings = azure_settings({"AZURE_STORAGE_ACCOUNT_NAME": "acct", "USE_EMULATOR": "on"})
    assert settings["spark.hadoop.fs.azure.abfs.endpoint"] == "127.0.0.1:10999"
    assert settings["spark.hadoop.fs.azure.always.use.https"] == "false"
    assert settings["spark.hadoop.fs.azure.account.hns.enabled"] == "false"
    assert settings["spark.hadoop.fs.azure.fns.account.service.type"] == "BLOB"


def test_an_endpoint_other_than_an_emulator_is_refused_for_spark(monkeypatch):
    """ABFS takes an endpoint only as an emulator's IP:PORT, and would otherwise reach the
    root's own host while delta-rs reached the endpoint: two stores for one root."""
    options = {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ENDPOINT": "https://10.0.0.5"}
    with pytest.raises(InvalidParameterValue, match="AZURE_STORAGE_ENDPOINT"):
        azure_settings(options)
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")  # the environment counts too
    assert f"spark.hadoop.fs.azure.account.key.{HOST}" in azure_settings({"ACCOUNT_KEY": "k"})
    monkeypatch.setenv("ACCOUNT_KEY", "not delta-rs's")  # a bare name counts only when given
    assert azure_settings({}) == {
        key: value for key, value in azure_settings({}).items() if "account.key" not in key
    }


def test_deltas_renaming_log_store_on_hadoops_abfs_commits_beside_the_native_engine(monkeypatch):
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    for scheme in ("abfs", "abfss"):
        assert commits_conditionally({}, scheme)  # Delta's default there: AzureLogStore
        assert commits_conditionally(
            {"spark.delta.logStore.class": "io.delta.storage.AzureLogStore"}, scheme
        )
        for key in (f"spark.delta.logStore.{scheme}.impl", f"delta.logStore.{scheme}.impl",
                    "delta.logStore.class"):  # fmt: skip
            assert not commits_conditionally({key: "io.delta.storage.HDFSLogStore"}, scheme)
        assert not commits_conditionally({f"spark.hadoop.fs.{scheme}.impl": "my.Fork"}, scheme)
    assert not commits_conditionally({}, "az")  # delta-rs's form: Spark cannot address it
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "17.3")  # its own Delta and ABFS
    assert not commits_conditionally({}, "abfss")
