"""Reading sources: folders (sub-folders or a mapping file), JSONL, parquet; bad records
become BadRecord with a message, never an exception."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gatekeeper.errors import UsageError
from gatekeeper.ingest.records import BadRecord, Record
from gatekeeper.ingest.sources import read_source

CODE = "class ModelNew:\n    pass\n"


def _split(items):
    items = list(items)
    return [i for i in items if isinstance(i, Record)], [i for i in items if isinstance(i, BadRecord)]


def test_folder_with_problem_subfolders_and_a_mapping_file(tmp_path):
    (tmp_path / "seed_mean").mkdir()
    (tmp_path / "seed_mean" / "a.py").write_text(CODE)
    (tmp_path / "loose.py").write_text(CODE)
    (tmp_path / "unmapped.py").write_text(CODE)
    (tmp_path / "bad.py").write_bytes(b"x = '\xff\xfe'\n")
    (tmp_path / "problems.json").write_text(json.dumps({"loose.py": "other", "bad.py": "seed_mean"}))
    good, bad = _split(read_source(tmp_path))
    assert {(r.source_id, r.problem) for r in good} == {("seed_mean/a.py", "seed_mean"), ("loose.py", "other")}
    messages = {b.source_id: b.message for b in bad}
    assert "not UTF-8" in messages["bad.py"]
    assert "no problem for this file" in messages["unmapped.py"] and "mapping" in messages["unmapped.py"]


def test_folder_mapping_toml_and_explicit_mapping(tmp_path):
    (tmp_path / "x.py").write_text(CODE)
    (tmp_path / "mapping.toml").write_text('"x.py" = "seed_mean"\n')
    good, bad = _split(read_source(tmp_path))
    assert [(r.source_id, r.problem) for r in good] == [("x.py", "seed_mean")] and not bad
    explicit = tmp_path / "m.json"
    explicit.write_text('{"x.py": "other"}')
    good, _ = _split(read_source(tmp_path, explicit))
    assert good[0].problem == "other"
    explicit.write_text('["not", "a", "table"]')
    with pytest.raises(UsageError, match="flat table"):
        read_source(tmp_path, explicit)


def test_jsonl_bad_lines_are_reported_and_the_rest_continue(tmp_path):
    path = tmp_path / "subs.jsonl"
    lines = [
        json.dumps({"id": "ok1", "problem": "seed_mean", "code": CODE}).encode(),
        b'{"id": "broken", "problem": ',
        json.dumps({"id": "nocode", "problem": "seed_mean"}).encode(),
        b"\xff\xfe not utf-8",
        b"[1, 2, 3]",
        b"",
        json.dumps({"id": 7, "problem": "seed_mean", "code": "\ud800"}).encode(),
        json.dumps({"id": "badtype", "problem": "seed_mean", "code": 12}).encode(),
        json.dumps({"id": 8, "problem": "seed_mean", "code": CODE}).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    good, bad = _split(read_source(path))
    assert [r.source_id for r in good] == ["ok1", "8"]
    messages = {b.ref: b.message for b in bad}
    assert "not valid JSON" in messages["line 2"]
    assert "missing field(s) code" in messages["line 3"]
    assert "not UTF-8" in messages["line 4"]
    assert "JSON object" in messages["line 5"]
    assert "surrogates" in messages["line 7"]
    assert "code must be a string" in messages["line 8"]


def test_parquet_rows_with_nulls_are_reported(tmp_path):
    path = tmp_path / "subs.parquet"
    table = pa.table({"id": ["a", None, "c"], "problem": ["seed_mean", "seed_mean", None],
                      "code": [CODE, CODE, CODE], "extra": [1, 2, 3]})
    pq.write_table(table, path)
    good, bad = _split(read_source(path))
    assert [r.source_id for r in good] == ["a"]
    assert [b.ref for b in bad] == ["row 2", "row 3"]
    assert "missing field(s) id" in bad[0].message and "missing field(s) problem" in bad[1].message


def test_a_corrupt_parquet_row_group_is_skipped_and_the_rest_continue(tmp_path):
    path = tmp_path / "subs.parquet"
    codes = [f"class ModelNew:\n    X = {i}\n" + "#" * 200 for i in range(600)]
    pq.write_table(pa.table({"id": [str(i) for i in range(600)], "problem": ["seed_mean"] * 600, "code": codes}),
                   path, row_group_size=200, compression="none")
    page = pq.ParquetFile(path).metadata.row_group(1).column(2).data_page_offset
    data = bytearray(path.read_bytes())
    data[page:page + 64] = b"\xff" * 64  # wreck the page header of group 2's code column
    path.write_bytes(bytes(data))
    good, bad = _split(read_source(path))
    ids = [int(r.source_id) for r in good]
    assert ids[:200] == list(range(200)) and ids[-200:] == list(range(400, 600))
    assert len(bad) == 1 and "cannot be read" in bad[0].message and bad[0].ref.endswith("-400")


def test_unreadable_sources_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        read_source(tmp_path / "nope.jsonl")
    (tmp_path / "x.csv").write_text("id,problem,code\n")
    with pytest.raises(UsageError, match="cannot tell the format"):
        read_source(tmp_path / "x.csv")
    (tmp_path / "fake.parquet").write_text("not parquet at all")
    with pytest.raises(UsageError, match="as parquet"):
        read_source(tmp_path / "fake.parquet")
    pq.write_table(pa.table({"id": ["a"], "code": [CODE]}), tmp_path / "nocol.parquet")
    with pytest.raises(UsageError, match="lacks column"):
        read_source(tmp_path / "nocol.parquet")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no submissions"):
        read_source(tmp_path / "empty")
