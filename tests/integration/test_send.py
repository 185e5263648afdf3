"""Sending: bodies, attributes, sizes in UTF-8 bytes, delays, atomic batches, DataFrames."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from sparkqueue.errors import EmptyBatchRequest, InvalidParameterValue
from tests.integration.conftest import both_engines

HOSTILE = [
    "'; DROP TABLE messages; --",
    "quote \" and ' and ` and \\",
    "line one\nline two\r\n\ttabbed",
    "emoji 🙂🚀 and 漢字",
    "${jndi:ldap://x} %s {0} \\x00-not-a-nul",
    "t.receipt_handle = s.receipt_handle OR 1=1",
]


@both_engines
def test_send_returns_an_id_and_the_body_round_trips(queue):
    message_id = queue.send("hello", attributes={"k": "v"})
    [message] = queue.receive()
    assert message.message_id == message_id
    assert message.body == "hello"
    assert message.attributes == {"k": "v"}
    assert message.receive_count == 1
    assert message.group_id is None and message.sequence_number is None


@both_engines
def test_hostile_strings_round_trip_intact(queue):
    ids = queue.send_batch(
        [{"body": text, "attributes": {"a.b-c_d": text}, "group_id": "g'1"} for text in HOSTILE]
    )
    received = {m.message_id: m for m in queue.receive(10)}
    assert {received[i].body for i in ids} == set(HOSTILE)
    assert all(m.attributes["a.b-c_d"] == m.body for m in received.values())
    assert all(m.group_id == "g'1" for m in received.values())


def test_invalid_bodies_are_rejected(queue):
    """One queue for every case (each refused before anything is written)."""
    for body in ["", None, 42, b"bytes", "nul\x00char", "bad\ufffe", "\ud800"]:
        with pytest.raises(InvalidParameterValue):
            queue.send(body)
            pytest.fail(f"accepted body {body!r}")
    assert queue.stats().visible == 0


def test_size_limit_counts_utf8_bytes_of_body_and_attributes(broker):
    queue = broker.create_queue("small", max_message_bytes=1024)
    queue.send("é" * 512)  # 1024 bytes exactly
    with pytest.raises(InvalidParameterValue, match="1025 bytes"):
        queue.send("é" * 512 + "x")
    queue.send("x" * 1000, attributes={"name": "v" * 20})  # 1000 + 4 + 20
    with pytest.raises(InvalidParameterValue, match="1024"):
        queue.send("x" * 1000, attributes={"name": "v" * 21})
    assert queue.stats().visible == 2


def test_invalid_attributes_are_rejected(queue):
    for attributes in [
        {"": "v"},
        {"AWS.reserved": "v"},
        {".lead": "v"},
        {"trail.": "v"},
        {"two..dots": "v"},
        {"sp ace": "v"},
        {"k": ""},
        {"k": 1},
        {f"k{i}": "v" for i in range(11)},
        ["not", "a", "dict"],
    ]:
        with pytest.raises(InvalidParameterValue):
            queue.send("body", attributes=attributes)
            pytest.fail(f"accepted attributes {attributes!r}")


def test_message_delay_overrides_queue_delay(broker, clock):
    queue = broker.create_queue("delayed", delay_seconds=10, visibility_timeout=600)
    queue.send("queue delay")
    queue.send("own delay", delay_seconds=0)
    queue.send("longer", delay_seconds=60)
    assert [m.body for m in queue.receive(10)] == ["own delay"]
    assert queue.stats().delayed == 2
    clock.advance(10)
    assert [m.body for m in queue.receive(10)] == ["queue delay"]
    clock.advance(50)
    assert [m.body for m in queue.receive(10)] == ["longer"]
    with pytest.raises(InvalidParameterValue, match="delay_seconds"):
        queue.send("too late", delay_seconds=901)


def test_send_batch_is_atomic_and_names_the_bad_entry(queue):
    with pytest.raises(InvalidParameterValue, match="entry 2"):
        queue.send_batch(["ok", {"body": "ok too"}, {"body": ""}, "never"])
    with pytest.raises(InvalidParameterValue, match=r"entry 1.*unknown"):
        queue.send_batch(["ok", {"body": "x", "colour": "red"}])
    with pytest.raises(EmptyBatchRequest):
        queue.send_batch([])
    assert queue.stats().visible == 0
    ids = queue.send_batch(["one", {"body": "two", "attributes": {"n": "2"}}])
    by_id = {m.message_id: m.body for m in queue.receive(10)}
    assert [by_id[i] for i in ids] == ["one", "two"]


@both_engines
def test_send_each_sends_the_valid_entries_and_reports_the_others(queue):
    outcomes = queue.send_each(
        [
            "one",
            {"body": ""},
            {"body": "n", "attributes": {"n": "1.5"}, "attribute_types": {"n": "Number"}},
            {"body": "bad", "attributes": {"n": "one"}, "attribute_types": {"n": "Number"}},
        ]
    )
    assert [type(o).__name__ for o in outcomes] == [
        "str",
        "InvalidParameterValue",
        "str",
        "InvalidParameterValue",
    ]
    got = {m.message_id: m for m in queue.receive(10)}
    assert sorted(m.body for m in got.values()) == ["n", "one"]
    assert got[outcomes[2]].attribute_types == {"n": "Number"}
    assert got[outcomes[0]].attribute_types == {}


def test_send_df_writes_every_row_in_one_commit(spark, queue):
    df = spark.range(500).select(
        F.concat(F.lit("job-"), F.col("id").cast("string")).alias("payload"),
        F.create_map(F.lit("n"), F.col("id").cast("string")).alias("meta"),
    )
    assert queue.send_df(df, body="payload", attributes="meta") == 500
    received = queue.receive(1000)
    assert sorted(m.body for m in received) == sorted(f"job-{i}" for i in range(500))
    assert all(m.attributes["n"] == m.body[4:] for m in received)
    assert len({m.message_id for m in received}) == 500


def test_send_df_delay_as_column_or_int(spark, broker, clock):
    queue = broker.create_queue("df-delay", visibility_timeout=600)
    df = spark.createDataFrame([("now", 0), ("later", 30)], "body string, wait int")
    assert queue.send_df(df, delay_seconds="wait") == 2
    assert queue.send_df(spark.createDataFrame([("all",)], "body string"), delay_seconds=60) == 1
    assert [m.body for m in queue.receive(10)] == ["now"]
    clock.advance(30)
    assert [m.body for m in queue.receive(10)] == ["later"]
    clock.advance(30)
    assert [m.body for m in queue.receive(10)] == ["all"]


def test_send_df_rejects_invalid_rows_and_writes_nothing(spark, queue):
    for rows, problem in [
        ([("fine",), ("",)], "empty"),
        ([("fine",), (None,)], "empty"),
        ([("x" * 262_145,)], "max_message_bytes"),
        ([("nul\x00",)], "character"),
    ]:
        with pytest.raises(InvalidParameterValue, match=problem):
            queue.send_df(spark.createDataFrame(rows, "body string"))
            pytest.fail(f"accepted rows {rows!r}")
    assert queue.stats().visible == 0


def test_send_df_rejects_unknown_or_mistyped_columns(spark, queue):
    df = spark.createDataFrame([("b", 1)], "body string, n int")
    with pytest.raises(InvalidParameterValue, match="not a column"):
        queue.send_df(df, body="missing")
    with pytest.raises(InvalidParameterValue, match="type int"):
        queue.send_df(df, body="n")
    mapped = df.select("body", F.create_map(F.lit("k"), F.col("n")).alias("m"))
    with pytest.raises(InvalidParameterValue, match="map<string,string>"):
        queue.send_df(mapped, attributes="m")
    with pytest.raises(InvalidParameterValue, match="delay_seconds"):
        queue.send_df(df, delay_seconds=901)
    bad_delay = spark.createDataFrame([("b", 1000)], "body string, d int")
    with pytest.raises(InvalidParameterValue, match="delay_seconds"):
        queue.send_df(bad_delay, delay_seconds="d")
    assert queue.stats().visible == 0


def test_send_df_counts_from_the_write_and_never_reads_back(spark, queue, monkeypatch):
    """Once its commit succeeded, send_df must not fail: a caller that retried would send twice.
    It takes the count from the write itself, so not even an unreadable history can make it."""
    real_sql = type(spark).sql

    def no_history(session, statement, *args, **kwargs):
        if "HISTORY" in statement:
            raise RuntimeError("history unavailable")
        return real_sql(session, statement, *args, **kwargs)

    monkeypatch.setattr(type(spark), "sql", no_history)
    assert queue.send_df(spark.range(7).select(F.col("id").cast("string").alias("body"))) == 7
    monkeypatch.undo()
    assert queue.stats().visible == 7


def test_an_empty_send_df_sends_nothing_and_returns_zero(spark, queue):
    assert queue.send_df(spark.createDataFrame([], "body string")) == 0
    assert queue.stats().visible == 0
    assert queue.receive() == []
