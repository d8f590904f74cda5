"""Nothing damaged is summarised: a record is checked where it is read, and a damaged one is set aside (a live
study, whose run is then redone) or named with the fix (a stored study)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from compile_study.core import record
from compile_study.core.calls import damaged
from compile_study.core.layout import Layout
from compile_study.core.record import RecordError, RunKey

from .conftest import GPU_REFERENCE, REPO
from .test_resilience import tiny_study
from .test_workflow import job_counts

KEY = RunKey("eager", "module", 8, "static", "fp32", 0)
STORED = GPU_REFERENCE


def good_record(path: Path, key: RunKey = KEY) -> Path:
    rec = {"schema_version": record.SCHEMA_VERSION, "config": key._asdict(), "env": {"device_type": "cpu"},
           "status": "ok", "error": None, "metrics": {"steady_step_ms": 1.5, "step_times_ms": [1.4, 1.5, 1.6] * 40}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=2))
    return path


@pytest.mark.unit
def test_a_truncated_record_is_named_where_it_is_read(tmp_path):
    path = good_record(tmp_path / "r0.json")
    full = path.read_bytes()
    path.write_bytes(full[: len(full) // 2])
    with pytest.raises(RecordError) as err:
        record.table([good_record(tmp_path / "ok.json"), path])
    msg = str(err.value)
    assert msg.startswith(f"{path}: incomplete or corrupt JSON (")
    assert f"in {len(full) // 2:,} bytes" in msg and ", line " in msg and ", column " in msg


@pytest.mark.parametrize("content, problem", [
    (b"", "empty file (0 bytes)"),
    (b"  \n", "empty file (3 bytes)"),
    (b"[1, 2]", "not a run record (top level: [1, 2] is not of type 'object')"),
    (b'{"results": 3}', "not a run record (top level: 'schema_version' is a required property)"),
    (json.dumps({"schema_version": 4, "config": {"compile_mode": "eager"}, "env": {}, "status": "ok"}).encode(),
     "not a run record (config: 'batch_size' is a required property)"),
    (json.dumps({"schema_version": 4, "config": KEY._asdict(), "env": {}, "status": "fine"}).encode(),
     "not a run record (status: 'fine' is not one of"),
    (json.dumps({"schema_version": 9, "config": KEY._asdict(), "env": {}, "status": "ok"}).encode(),
     "schema version 9 is newer than this code's"),
])
@pytest.mark.unit
def test_an_empty_foreign_or_newer_file_is_named_with_what_is_wrong(tmp_path, content, problem):
    path = tmp_path / "r0.json"
    path.write_bytes(content)
    assert record.problem(path).startswith(problem)
    with pytest.raises(RecordError, match=f"^{path}: "):
        record.read(path)


@pytest.mark.unit
def test_a_record_under_another_runs_path_is_named(tmp_path):
    path = good_record(tmp_path / "bs16" / "r0.json")  # holds batch 8's record
    assert record.problem(path, KEY._replace(batch_size=16)) == (
        "holds the record of another run (eager module bs8 static fp32 r0)")
    assert record.problem(path, KEY) is None


@pytest.mark.unit
def test_damaged_outputs_are_set_aside_with_a_note_and_good_ones_stay(tmp_path):
    layout = Layout(str(tmp_path / "results" / "cpu"))
    good = good_record(Path(layout.record(KEY)))
    bad_key = KEY._replace(batch_size=16)
    bad = good_record(Path(layout.record(bad_key)), bad_key)
    bad.write_bytes(bad.read_bytes()[:100])
    peak = Path(layout.peak)
    peak.write_text("")
    outputs = {str(good): KEY, str(bad): bad_key, str(peak): None, layout.mlp: None}  # mlp: not there
    found = damaged.problems(outputs)
    assert [p for p, _ in found] == [str(bad), str(peak)] and good.is_file() and bad.is_file()  # reading moves nothing
    lines = [damaged.set_aside(layout, path, why) for path, why in found]
    assert len(lines) == 2 and all(line.startswith("damaged: ") for line in lines)
    assert good.is_file() and not bad.exists() and not peak.exists()
    aside = Path(layout.damaged) / "runs/static/fp32/eager/module/bs16/r0.json"
    assert aside.read_bytes() == good_record(tmp_path / "x.json", bad_key).read_bytes()[:100]
    note = aside.with_name("r0.json.why.txt").read_text()
    assert note.startswith(f"{bad}: incomplete or corrupt JSON")
    assert (Path(layout.damaged) / "peak.json.why.txt").read_text().startswith(f"{peak}: empty file")
    peak.write_text("[]")  # damaged again: the first copy is kept
    assert [damaged.set_aside(layout, *found) for found in damaged.problems({str(peak): None})] == [
        f"damaged: {peak}: not a JSON object (a list); set aside as {layout.damaged}/peak.json.1, and the job that "
        "makes it runs again"]


@pytest.mark.dag
def test_a_dry_run_names_a_damaged_record_and_moves_nothing(tmp_path):
    cmd = tiny_study(tmp_path, [8])
    path = tmp_path / "results/cpu/runs/static/fp32/eager/module/bs8/r0.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"schema_version": 4, "config": {"compile_mode": "eager", "batch_')
    res = subprocess.run(cmd + ["-n"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert ("damaged: results/cpu/runs/static/fp32/eager/module/bs8/r0.json: incomplete or corrupt JSON (") in res.stderr
    assert "a run would set it aside under damaged/ and redo its job" in res.stderr
    assert path.is_file() and not (tmp_path / "results/cpu/damaged").exists()
    assert "Traceback" not in res.stderr and job_counts(res.stdout)["train_run"] == 1


@pytest.mark.dag
def test_a_stored_studys_damaged_record_is_named_with_the_fix(tmp_path):
    study = tmp_path / "stored"
    study.mkdir()
    shutil.copy(STORED / "config.yaml", study / "config.yaml")
    records = sorted((STORED / "runs").rglob("r*.json"))[:2]
    for src in records:
        dest = study / src.relative_to(STORED)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
    bad = study / records[1].relative_to(STORED)
    bad.write_bytes(bad.read_bytes()[:500])
    res = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(study),
                          "--cores", "1", "-n"], capture_output=True, text=True, timeout=300, cwd=study)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    rel = str(bad.relative_to(study))
    assert "1 damaged record(s) in this stored study" in res.stderr
    assert f"  - {rel}: incomplete or corrupt JSON" in res.stderr and "git checkout -- <path>" in res.stderr
    assert yaml.safe_load((study / "config.yaml").read_text())  # nothing of the stored study was moved
    assert bad.is_file()


@pytest.mark.unit
def test_views_showing_a_run_whose_record_is_gone_are_stale(tmp_path):
    layout = Layout(str(tmp_path / "results" / "cpu"))
    keys = [KEY, KEY.with_repeat(1), KEY._replace(batch_size=16)]
    for key in keys:
        good_record(Path(layout.record(key)), key)
    Path(layout.summary).write_text("shape_regime,precision,batch_size,compile_mode,compile_scope,n\n"
                                    "static,fp32,8,eager,module,2\nstatic,fp32,16,eager,module,1\n")
    Path(layout.paper("md")).write_text("the paper")
    assert damaged.stale_views(layout, keys + [KEY.with_repeat(2)]) == ([], "")  # a new repeat: nothing is gone
    Path(layout.record(KEY.with_repeat(1))).unlink()
    views, why = damaged.stale_views(layout, keys)
    assert views == [layout.summary, layout.paper("md")]
    assert why == f"{layout.summary} counts 2 record(s) of eager module bs8 static fp32 and 1 are there"
