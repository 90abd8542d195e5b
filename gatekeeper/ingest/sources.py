"""Read a SOURCE of submissions: a folder, a JSONL file or a parquet file.

Every reader yields Record or BadRecord; a bad record never stops the others. Only a
source that cannot be read at all (missing, unknown format, not parquet) is a UsageError.

Folder layout (docs/ingest.md): `SOURCE/<problem>/<name>.py`, the problem being the
sub-folder's name; or any layout plus a mapping file (`problems.json` or `mapping.toml`
in SOURCE, or `--mapping FILE`) from each file's path relative to SOURCE to its problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator, Optional, Union

from gatekeeper.errors import UsageError
from gatekeeper.path_errors import not_found
from gatekeeper.ingest.records import BadRecord, Record

Item = Union[Record, BadRecord]
MAPPING_NAMES = ("problems.json", "mapping.toml")
FIELDS = ("id", "problem", "code")
META_FIELDS = ("model", "author")  # optional; the leaderboard shows them when present


def read_source(source: Path, mapping: Optional[Path] = None,
                mapper: Optional[Callable[[Path], Optional[str]]] = None) -> Iterator[Item]:
    """`mapper`: a file's problem name from the configuration's problem_map (folders only)."""
    if source.is_dir():
        return read_folder(source, mapping, mapper)
    if not source.is_file():
        raise UsageError(f"{not_found(source, 'ingest source')}; give a folder, a .jsonl or a .parquet file")
    if mapping is not None:
        raise UsageError("--mapping applies to a folder source only; JSONL and parquet records name their problem")
    suffix = source.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return read_jsonl(source)
    if suffix in (".parquet", ".pq"):
        return read_parquet(source)
    raise UsageError(f"cannot tell the format of {source}: name it *.jsonl or *.parquet, or give a folder")


def _load_mapping(path: Path) -> dict[str, str]:
    try:
        raw = path.read_bytes().decode("utf-8")
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(raw)
        else:
            data = json.loads(raw)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"cannot read the mapping file {path}: {exc}; it maps each submission "
                         "file (path relative to SOURCE) to a problem id") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise UsageError(f"mapping file {path} must be a flat table of \"relative/path.py\" = \"problem\" strings")
    return {k.replace("\\", "/"): v for k, v in data.items()}


def read_folder(root: Path, mapping_file: Optional[Path] = None,
                mapper: Optional[Callable[[Path], Optional[str]]] = None) -> Iterator[Item]:
    if mapping_file is None:
        mapping_file = next((root / n for n in MAPPING_NAMES if (root / n).is_file()), None)
    mapping = _load_mapping(mapping_file) if mapping_file is not None else {}
    files = sorted(p for p in root.rglob("*.py") if p.is_file())
    if not files:
        raise UsageError(f"no submissions in {root}: looked for *.py files")
    return _folder_items(root, files, mapping, mapper)


def _folder_items(root: Path, files: list[Path], mapping: dict[str, str],
                  mapper: Optional[Callable[[Path], Optional[str]]] = None) -> Iterator[Item]:
    for path in files:
        rel = path.relative_to(root).as_posix()
        problem = mapping.get(rel)
        if problem is None and mapper is not None:
            try:
                problem = mapper(path)
            except UsageError as exc:  # a matching entry whose problem is missing: this record only
                yield BadRecord(ref=rel, source_id=rel, message=str(exc))
                continue
        if problem is None and path.parent != root:
            problem = path.parent.name
        if problem is None:
            yield BadRecord(ref=rel, source_id=rel, message=(
                f"{rel}: no problem for this file; put it under {root}/<problem>/ or list it "
                f"in a mapping file ({' or '.join(MAPPING_NAMES)} in {root}, or --mapping)"))
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            yield BadRecord(ref=rel, source_id=rel, problem=problem, message=f"{rel}: cannot read: {exc.strerror}")
            continue
        yield _decoded(rel, rel, problem, data)


def _decoded(ref: str, source_id: str, problem: str, data: Union[bytes, str]) -> Item:
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            return BadRecord(ref=ref, source_id=source_id, problem=problem,
                             message=f"{ref}: code contains unpaired surrogates, not valid UTF-8 text")
        return Record(source_id=source_id, problem=problem, code=data, ref=ref)
    try:
        return Record(source_id=source_id, problem=problem, code=data.decode("utf-8"), ref=ref)
    except UnicodeDecodeError as exc:
        return BadRecord(ref=ref, source_id=source_id, problem=problem,
                         message=f"{ref}: code is not UTF-8 text (byte {exc.start}); re-encode it as UTF-8")


def _from_fields(ref: str, values: dict) -> Item:
    missing = [f for f in FIELDS if values.get(f) is None]
    source_id = "" if values.get("id") is None else str(values["id"])
    problem = values.get("problem") if isinstance(values.get("problem"), str) else ""
    if missing:
        return BadRecord(ref=ref, source_id=source_id, problem=problem,
                         message=f"{ref}: missing field(s) {', '.join(missing)}; each record needs id, problem, code")
    if not isinstance(values["id"], (str, int)) or isinstance(values["id"], bool):
        return BadRecord(ref=ref, problem=problem, message=f"{ref}: id must be a string or an integer")
    if not isinstance(values["problem"], str):
        return BadRecord(ref=ref, source_id=source_id, message=f"{ref}: problem must be a string (a problem file's stem)")
    code = values["code"]
    if not isinstance(code, (str, bytes)):
        return BadRecord(ref=ref, source_id=source_id, problem=problem, message=f"{ref}: code must be a string")
    item = _decoded(ref, source_id, problem, code)
    meta = {k: str(values[k])[:200] for k in META_FIELDS if isinstance(values.get(k), (str, int))}
    if meta and isinstance(item, Record):
        from dataclasses import replace

        item = replace(item, **meta)
    return item


def read_jsonl(path: Path) -> Iterator[Item]:
    try:
        handle = path.open("rb")  # opened now, so an unreadable file fails before any work
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    return _jsonl_items(handle)


def _jsonl_items(handle) -> Iterator[Item]:
    with handle:
        for number, raw in enumerate(handle, start=1):
            ref = f"line {number}"
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield BadRecord(ref=ref, message=f"{ref}: not UTF-8 (byte {exc.start}); skipped")
                continue
            try:
                values = json.loads(text)
            except ValueError as exc:
                yield BadRecord(ref=ref, message=f"{ref}: not valid JSON ({exc.msg} at column {exc.colno}); skipped")
                continue
            except RecursionError:
                yield BadRecord(ref=ref, message=f"{ref}: JSON nested too deeply; skipped")
                continue
            if not isinstance(values, dict):
                yield BadRecord(ref=ref, message=f"{ref}: expected a JSON object with id, problem, code")
                continue
            yield _from_fields(ref, values)


def read_parquet(path: Path) -> Iterator[Item]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        from gatekeeper.distribution import pip_install

        raise UsageError(f"reading parquet needs pyarrow: {pip_install('ingest')}") from None
    try:
        parquet = pq.ParquetFile(str(path))
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise UsageError(f"cannot read {path} as parquet: {exc}") from None
    names = set(parquet.schema_arrow.names)
    missing = [f for f in FIELDS if f not in names]
    if missing:
        raise UsageError(f"{path} lacks column(s) {', '.join(missing)}; it needs id, problem, code")
    return _parquet_items(parquet)


def _parquet_items(parquet) -> Iterator[Item]:
    """Row group by row group: a corrupt group is reported with its row range and skipped,
    and the groups after it are still read."""
    first = 0
    for group in range(parquet.num_row_groups):
        size = parquet.metadata.row_group(group).num_rows
        row = first
        try:
            columns = list(FIELDS) + [f for f in META_FIELDS if f in parquet.schema_arrow.names]
            for batch in parquet.iter_batches(batch_size=256, row_groups=[group], columns=columns):
                for values in batch.to_pylist():
                    row += 1
                    yield _from_fields(f"row {row}", values)
        except Exception as exc:  # pyarrow raises several types for corrupt pages
            yield BadRecord(ref=f"rows {row + 1}-{first + size}",
                            message=f"rows {row + 1}-{first + size} cannot be read ({exc}); skipped")
        first += size
