"""Spark's S3 settings from delta-rs's storage options, and which sessions commit conditionally
(JVM-free: the settings are plain values; tests/integration/test_object_storage_engines.py runs
them)."""

from __future__ import annotations

import pytest

from sparkqueue.errors import InvalidParameterValue
from sparkqueue.store.spark_s3 import (
    LOG_STORE_CLASS,
    UNSAFE_WITH_SPARK,
    check_shared_options,
    commits_conditionally,
    s3_settings,
)

OPTIONS = {
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
    "AWS_ACCESS_KEY_ID": "key",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "AWS_REGION": "eu-west-1",
    "AWS_ALLOW_HTTP": "true",
}


def test_one_mapping_configures_spark_s3a_as_it_configures_delta_rs(monkeypatch):
    for name in ("AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    settings = s3_settings(OPTIONS)
    assert settings["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert settings["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert settings["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert settings["spark.hadoop.fs.s3a.access.key"] == "key"
    assert settings["spark.hadoop.fs.s3a.secret.key"] == "secret"
    assert settings["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert settings["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert settings["spark.hadoop.fs.s3a.create.conditional.enabled"] == "true"
    assert commits_conditionally(settings, "s3") and commits_conditionally(settings, "s3a")
    token = s3_settings({**OPTIONS, "aws_session_token": "t"})  # delta-rs's keys in any case
    assert token["spark.hadoop.fs.s3a.session.token"] == "t"
    assert token["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(
        "TemporaryAWSCredentialsProvider"
    )


def test_credentials_left_out_come_from_the_environment_as_for_delta_rs(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://s3.example.com")
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    settings = s3_settings({})
    assert settings["spark.hadoop.fs.s3a.endpoint"] == "https://s3.example.com"
    assert settings["spark.hadoop.fs.s3a.endpoint.region"] == "us-west-2"
    assert "spark.hadoop.fs.s3a.access.key" not in settings  # S3A's own chain finds them


def test_a_plain_http_endpoint_needs_allow_http_for_both_engines(monkeypatch):
    monkeypatch.delenv("AWS_ALLOW_HTTP", raising=False)
    with pytest.raises(InvalidParameterValue, match="AWS_ALLOW_HTTP"):
        s3_settings({key: value for key, value in OPTIONS.items() if key != "AWS_ALLOW_HTTP"})


def test_only_the_conditional_log_store_lets_the_native_engine_commit_beside_spark():
    default = "io.delta.storage.S3SingleDriverLogStore"
    assert not commits_conditionally({}, "s3")
    assert not commits_conditionally({"spark.delta.logStore.s3.impl": default}, "s3")
    assert commits_conditionally({"spark.delta.logStore.class": LOG_STORE_CLASS}, "s3a")
    assert not commits_conditionally({"spark.delta.logStore.s3.impl": LOG_STORE_CLASS}, "gs")


def test_delta_rs_settings_that_change_its_s3_commits_are_refused_beside_spark(monkeypatch):
    for name in UNSAFE_WITH_SPARK:
        monkeypatch.delenv(name, raising=False)
    check_shared_options({"AWS_REGION": "us-east-1"}, "s3://b/q")
    with pytest.raises(InvalidParameterValue, match="AWS_S3_ALLOW_UNSAFE_RENAME"):
        check_shared_options({"aws_s3_allow_unsafe_rename": "true"}, "s3a://b/q")
    monkeypatch.setenv("AWS_CONDITIONAL_PUT", "disabled")  # the environment counts too
    with pytest.raises(InvalidParameterValue, match="AWS_CONDITIONAL_PUT"):
        check_shared_options({}, "s3://b/q")
    check_shared_options({}, "abfss://c@a.dfs.core.windows.net/q")  # S3's settings only on S3
