"""Which `_delta_log` files a trim deletes: only history behind a checkpoint older than `keep`."""

from __future__ import annotations

import os

from sparkqueue.store.logtrim import LogEntry, clear_unfinished_log, expired, trim_log

NOW = 1_000_000.0
OLD = NOW - 3_600  # written an hour ago
KEEP = 600.0


def commit(version: int, at: float) -> list[LogEntry]:
    return [LogEntry(f"{version:020d}.json", at), LogEntry(f"{version:020d}.crc", at)]


def checkpoint(version: int, at: float) -> LogEntry:
    return LogEntry(f"{version:020d}.checkpoint.parquet", at)


def test_history_behind_the_newest_old_checkpoint_goes_oldest_first():
    entries = [
        *commit(0, OLD),
        *commit(1, OLD),
        *commit(2, OLD),
        checkpoint(2, OLD),
        *commit(3, OLD),
        *commit(4, NOW),
        checkpoint(4, NOW),  # too young to anchor: a reader may still be building on 2 or 3
        LogEntry("_last_checkpoint", NOW),
    ]
    assert expired(entries, NOW, KEEP) == [
        "00000000000000000000.crc",
        "00000000000000000000.json",
        "00000000000000000001.crc",
        "00000000000000000001.json",
    ]


def test_without_an_old_enough_checkpoint_nothing_goes():
    entries = [*commit(0, OLD), *commit(1, OLD), checkpoint(1, NOW - KEEP + 1)]
    assert expired(entries, NOW, KEEP) == []


def test_older_checkpoints_go_and_multi_part_ones_never_anchor():
    entries = [
        checkpoint(10, OLD),
        *commit(10, OLD),
        LogEntry(f"{20:020d}.checkpoint.0000000001.0000000002.parquet", OLD),
        *commit(20, OLD),
        LogEntry("_last_checkpoint", OLD),
    ]
    assert expired(entries, NOW, KEEP) == []
    entries.append(checkpoint(30, OLD))
    assert expired(entries, NOW, KEEP) == [
        "00000000000000000010.checkpoint.parquet",
        "00000000000000000010.crc",
        "00000000000000000010.json",
        "00000000000000000020.checkpoint.0000000001.0000000002.parquet",
        "00000000000000000020.crc",
        "00000000000000000020.json",
    ]


def test_abandoned_temporary_files_go_once_old():
    orphan = ".00000000000000000007.json.0f3c.tmp"  # Spark's
    native = "_commit_1b4e28ba-2fa1-11d2-883f-0016d3cca427.json.tmp"  # delta-rs's
    entries = [LogEntry(orphan, OLD), LogEntry(native, OLD), LogEntry(".young.tmp", NOW)]
    assert expired(entries, NOW, KEEP) == [orphan, native]


def test_trim_deletes_from_a_folder_and_tolerates_a_missing_table(tmp_path):
    log_dir = tmp_path / "_delta_log"
    log_dir.mkdir()
    for entry in [*commit(0, OLD), checkpoint(1, OLD), *commit(1, OLD), *commit(2, NOW)]:
        path = log_dir / entry.name
        path.touch()
        os.utime(path, (entry.written_at, entry.written_at))
    assert trim_log(str(tmp_path), NOW, KEEP) == 2
    assert sorted(os.listdir(log_dir)) == [
        "00000000000000000001.checkpoint.parquet",
        "00000000000000000001.crc",
        "00000000000000000001.json",
        "00000000000000000002.crc",
        "00000000000000000002.json",
    ]
    assert trim_log(str(tmp_path / "gone"), NOW, KEEP) == 0


def test_a_log_without_any_version_is_cleared_and_a_real_one_kept(tmp_path):
    stub = tmp_path / "stub"
    (stub / "_delta_log" / "_staged_commits").mkdir(parents=True)  # a creation killed early
    assert clear_unfinished_log(str(stub))
    assert not stub.exists()  # nothing else was in it
    table = tmp_path / "table"
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / "00000000000000000000.json").write_text("{}")
    assert not clear_unfinished_log(str(table))
    assert (table / "_delta_log" / "00000000000000000000.json").exists()
    assert not clear_unfinished_log(str(tmp_path / "missing"))
