"""The local session's set-up rules that need no JVM: properties files and the jar cache check."""

from __future__ import annotations

from pathlib import Path

from sparkqueue.session import delta_maven_coordinate, jars_cached, read_properties


def test_a_properties_file_reads_like_java_properties(tmp_path: Path):
    conf = tmp_path / "spark-defaults.conf"
    conf.write_text("# comment\nspark.master  local[2]\nspark.a=b=c\nspark.flag\n\n")
    assert read_properties(conf) == {"spark.master": "local[2]", "spark.a": "b=c", "spark.flag": ""}


def test_the_delta_jar_counts_as_cached_only_when_ivy_holds_that_version(tmp_path: Path):
    coordinate = delta_maven_coordinate()  # io.delta:delta-spark_<spark>_2.13:<delta>
    assert not jars_cached(coordinate, tmp_path)
    group, artifact, version = coordinate.split(":")
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / f"{group}_{artifact}-0.0.1.jar").touch()  # another version
    assert not jars_cached(coordinate, tmp_path)
    (tmp_path / "jars" / f"{group}_{artifact}-{version}.jar").touch()
    assert jars_cached(coordinate, tmp_path)
