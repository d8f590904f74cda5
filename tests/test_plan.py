"""The plan the rules read (compile_study/plan/study.py): the shipped config's jobs, inputs and params, and the
repairs, which only an invocation that runs jobs makes (plan/repairs.py). No Snakemake run: a stand-in workflow."""

from __future__ import annotations

import copy
import errno
import os
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from compile_study.core.calls import resume
from compile_study.core.layout import Layout
from compile_study.core.record import RunKey
from compile_study.plan import repairs
from compile_study.plan.study import Plan

from .conftest import REPO

pytestmark = pytest.mark.unit
SHIPPED = yaml.safe_load((REPO / "config.yaml").read_text())


def workflow(executing: bool = False, cores: int = 16) -> SimpleNamespace:
    """What the plan reads of Snakemake's workflow object; `executing`: an invocation that runs jobs."""
    return SimpleNamespace(basedir=str(REPO), cores=cores, is_main_process=True, local_exec=True,
                           executor_plugin=object() if executing else None, dryrun=False, touch=False)


@pytest.fixture
def gpu_plan(tmp_path, monkeypatch) -> Plan:
    monkeypatch.chdir(tmp_path)
    return Plan(workflow(), copy.deepcopy(SHIPPED) | {"device": "cuda", "yardstick": {"cuda": None}})


def test_the_gpu_plan_runs_the_whole_grid_with_evidence_once_per_configuration(gpu_plan):
    P = gpu_plan
    assert P.device == "cuda" and len(P.runs) == 76 and P.layout.root == "results/cuda"
    key = RunKey("reduce-overhead", "module", 32, "static", "bf16", 1)
    params = P.timed.params(key._asdict())
    assert params["evidence"] is False and params["max_epoch_steps"] == 60 and params["lr"] == 3.0e-4
    assert P.timed.params(key.with_repeat(0)._asdict())["evidence"] is True
    assert "sub_grid" not in params and "search_from" not in params
    # every repeat waits for its configuration's first cold compile (its cache); an eager run for nothing
    assert P.compiled_cache(key._asdict()) == [P.layout.compile_record(key, 0)]
    assert P.compiled_cache(key._replace(compile_mode="eager")._asdict()) == []
    # the whole step captured eagerly (step-graph's control) compiles nothing: it waits for no cold compile either
    control = RunKey("eager", "eager-step-graph", 32, "static", "bf16", 0)
    assert control in P.runs and P.compiled_cache(control._asdict()) == []


def test_the_compile_phase_compiles_each_configuration_cold_n_times_and_a_gemm_search_once_alone(gpu_plan):
    P = gpu_plan
    # 14 configurations compiled cold 3 times, the two max-autotune ones once; a portable start 3 times each
    # configuration of a scope one trains with (14: the aot-eager and one-side scopes are diagnostic)
    cold = [p for p in P.compile.records() if Path(p).name.startswith("c")]
    portable = [p for p in P.compile.records() if Path(p).name.startswith("p")]
    assert len(P.compile.compiles) == 16 and len(cold) == 14 * 3 + 2 and len(portable) == 14 * 3
    ma = RunKey("max-autotune", "module", 512, "static", "bf16", 0)
    nocg = ma._replace(compile_mode="max-autotune-no-cudagraphs")
    assert P.compile.compiles[ma] == {"n": 1, "alone": True, "search_from": None, "portable": 3}
    assert P.compile.compiles[nocg] == {"n": 1, "alone": False, "search_from": ma, "portable": 3}

    def wc(key, index):
        return SimpleNamespace(**{k: str(v) for k, v in key._asdict().items() if k != "repeat"}, index=str(index))

    assert P.compile.inputs(wc(nocg, 0))["search"] == P.layout.compile_record(ma, 0)  # after the search
    assert (P.compile.threads(wc(ma, 0)), P.compile.timed_slots(wc(ma, 0))) == (16, 1)  # the search: a timed job's
    ro = RunKey("reduce-overhead", "module", 32, "static", "bf16", 0)
    assert (P.compile.threads(wc(ro, 2)), P.compile.timed_slots(wc(ro, 2)), P.compile.slots) == (2, 0, 8)
    first, third = P.compile.params(wc(ro, 0)), P.compile.params(wc(ro, 2))
    assert first["cache_dir"] == P.compile.cache_dir_of(ro) and third["cache_dir"] != first["cache_dir"]  # scratch
    assert first["run"]["repeat"] == 0 and third["run"]["repeat"] == 2 and third["run"]["evidence"] is False
    assert first["compile"]["slots"] == P.compile.slots  # the compile slot knows the invocation's, not only the host's
    assert P.compile.params(wc(nocg, 0))["search_cache"] == P.compile.cache_dir_of(ma)
    # the first cold compile saves the artifacts its portable starts load, each on an empty scratch cache of its own
    assert first["artifacts"] == {"save": P.compile.artifacts_of(ro)} and third["artifacts"] is None
    start = P.compile.portable_params(wc(ro, 1))
    assert start["artifacts"] == {"load": P.compile.artifacts_of(ro)} and start["compile"]["start"] == "portable"
    assert start["cache_dir"] not in (first["cache_dir"], third["cache_dir"]) and start["run"]["repeat"] == 1
    assert not start["compile"]["alone"] and P.compile.portable_inputs(wc(ro, 1))["cold"] == P.layout.compile_record(ro, 0)
    # a GEMM search's portable start loads its search results: among the others, not alone
    assert not P.compile.portable_params(wc(ma, 0))["compile"]["alone"]
    # the inference graph the first run's evidence times: compiled by its configuration's first cold compile alone
    infers = [key for key in P.compile.compiles if P.compile.params(wc(key, 0))["compile"]["inference"]]
    assert len(infers) == 7 and all(k.compile_scope == "module" and k.shape_regime == "static" for k in infers)
    assert not third["compile"]["inference"] and not start["compile"]["inference"]


def test_each_parity_check_runs_at_its_smallest_static_cell_on_that_cells_cache(gpu_plan):
    P = gpu_plan
    pairs = [(Path(p).parent.name, Path(p).stem) for p in P.compile.parity_records()]
    assert sorted(pairs) == [("bf16", m) for m in ("default", "max-autotune", "max-autotune-no-cudagraphs",
                                                   "reduce-overhead")] + [("fp32", "default")]
    ro = P.compile.parity_check(SimpleNamespace(precision="bf16", compile_mode="reduce-overhead"))
    assert ro["kwargs"]["settings"]["batch_size"] == 32
    assert ro["cache_dir"] == "resources/inductor_cache/cuda/static-bf16-reduce-overhead-module-bs32"
    ma = P.compile.parity_check(SimpleNamespace(precision="bf16", compile_mode="max-autotune"))
    assert ma["kwargs"]["settings"]["batch_size"] == 512
    cell = P.compile.parity_inputs(SimpleNamespace(precision="bf16", compile_mode="reduce-overhead"))["cell"]
    assert cell.endswith("compiles/static/bf16/reduce-overhead/module/bs32/c0.json")  # on its first compile's cache


def test_the_targets_name_every_record_and_a_method_check_its_threads(gpu_plan):
    P = gpu_plan
    targets = P.all_targets()
    assert sum("/runs/" in t for t in targets) == 76 and P.layout.summary in targets
    assert sum("/compiles/" in t for t in targets) == 44 + 42  # cold compiles and portable starts
    assert P.checks.threads(SimpleNamespace(check="concurrency")) == 16  # two timed jobs' worth, capped by the cores
    assert P.checks.threads(SimpleNamespace(check="timer_check")) == P.lanes.timed_threads


def test_bad_config_stops_the_plan_with_the_key_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = copy.deepcopy(SHIPPED) | {"device": "cpu"}
    bad["grids"]["cpu"][0]["batch_size"] = [0]
    with pytest.raises(SystemExit, match=r"batch_size"):
        Plan(workflow(), bad)
    unknown = copy.deepcopy(SHIPPED) | {"device": "cpu", "checks": {"cpu": ["timer_check", "timer_chek"]}}
    with pytest.raises(SystemExit, match=r"checks.cpu: no method check 'timer_chek' \(measure/checks/ declares "):
        Plan(workflow(), unknown)


def damaged_study(root: Path) -> tuple[Layout, dict, str]:
    """A study directory with one truncated record and one whole record Snakemake marked incomplete."""
    layout = Layout(str(root / "results" / "cpu"))
    key = RunKey("eager", "module", 8, "static", "fp32", 0)
    torn, whole = Path(layout.record(key)), Path(layout.peak)
    torn.parent.mkdir(parents=True)
    torn.write_text('{"schema_version": 4, "config"')
    whole.write_text('{"peaks": {}}')
    incomplete = root / ".snakemake" / "incomplete"
    incomplete.mkdir(parents=True)
    resume.marker(str(whole), incomplete).write_text("")
    return layout, {str(torn): key, str(whole): None}, str(incomplete)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_repairs_are_found_without_a_change_and_made_only_when_asked(tmp_path):
    layout, outputs, incomplete = damaged_study(tmp_path)
    before = tree(tmp_path)
    found = repairs.find(layout, outputs, incomplete)
    lines = repairs.describe(found)
    assert tree(tmp_path) == before  # a dry run changes nothing
    torn = next(iter(outputs))
    assert lines[0].startswith(f"damaged: {torn}: incomplete or corrupt JSON")
    assert "a run would set it aside" in lines[0] and "a run would keep 1 output(s)" in lines[1]
    made = repairs.make(found, layout, incomplete)
    assert not Path(torn).exists() and Path(layout.damaged).is_dir()
    assert resume.marked(incomplete) == [] and made[-1].startswith("kept 1 output(s)")


def test_a_repair_the_file_system_refuses_is_one_line_naming_path_and_permission(tmp_path):
    if os.geteuid() == 0:  # root ignores directory permissions: the error is made as the kernel would make it
        e = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "results/cpu/runs/r0.json"))
    else:
        pytest.skip("made as root")
    layout = Layout(str(tmp_path / "results" / "cpu"))
    Path(layout.paper("md")).parent.mkdir(parents=True)
    Path(layout.paper("md")).write_text("old paper")
    line = repairs.refused(e, "cannot set aside the damaged results/cpu/runs/r0.json", layout)
    assert line == (f"cannot set aside the damaged results/cpu/runs/r0.json: {e.filename}: no write permission on "
                    f"{tmp_path}/results/cpu/runs; {layout.paper('md')} stay as they are and may be stale")
    assert "\n" not in line


def test_the_plan_repairs_only_in_an_invocation_that_runs_jobs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cfg = copy.deepcopy(SHIPPED) | {"device": "cpu"}
    torn = Path("results/cpu/runs/static/fp32/eager/module/bs8/r0.json")
    torn.parent.mkdir(parents=True)
    torn.write_text("{")
    dry = Plan(workflow(executing=False), copy.deepcopy(cfg))
    dry.all_targets()
    assert torn.is_file() and "a run would set it aside" in capsys.readouterr().err
    real = Plan(workflow(executing=True), copy.deepcopy(cfg))
    real.all_targets()
    real.all_targets()  # once per invocation
    assert not torn.exists() and Path("results/cpu/damaged", *torn.parts[2:]).is_file()
    assert capsys.readouterr().err.count("set aside as") == 1


def test_a_run_that_cannot_write_a_missing_output_says_where_and_what_is_stale(tmp_path, monkeypatch):
    layout = Layout(str(tmp_path / "results" / "cpu"))
    Path(layout.paper("md")).parent.mkdir(parents=True)
    Path(layout.paper("md")).write_text("old paper")
    missing = layout.record(RunKey("eager", "module", 8, "static", "fp32", 0))
    assert repairs.unwritable(layout, [missing]) is None  # (root may write anywhere)
    monkeypatch.setattr(os, "access", lambda path, mode: not str(path).startswith(str(tmp_path / "results")))
    line = repairs.unwritable(layout, [missing])
    assert line == (f"cannot make {missing}: {tmp_path}/results/cpu: no write permission on {tmp_path}/results/cpu; "
                    f"{layout.paper('md')} stay as they are and may be stale")


def test_under_a_time_limit_a_job_that_would_not_end_before_it_is_not_started(gpu_plan, monkeypatch):
    """A method check, the MLP claim, the matmul peak and a parity check are priced like runs: with 100 s left, a
    check estimated at 150 s (no stored study here: the priors) is refused, and so is the timer check, priced
    per case (four of 30 s); the matmul peak (3 s) starts; without a limit nothing is refused."""
    from compile_study.core.calls import deadline
    from compile_study.measure import jobs

    concurrency = gpu_plan.timed.expected_job_seconds("method_check:compile_concurrency")
    jobs.in_time(concurrency, "checks/compile_concurrency.json")  # no limit: not even asked
    monkeypatch.setenv(deadline.VAR, str(time.time() + 100))
    with pytest.raises(deadline.PastDeadline, match=r"compile_concurrency.json: not started: it takes about 150 s"):
        jobs.in_time(concurrency, "checks/compile_concurrency.json")
    with pytest.raises(deadline.PastDeadline, match=r"timer_check.json: not started: it takes about 120 s"):
        jobs.in_time(gpu_plan.timed.expected_job_seconds("method_check:timer_check"), "checks/timer_check.json")
    jobs.in_time(gpu_plan.timed.expected_job_seconds("measure_peak"), "peak.json")
    with pytest.raises(deadline.PastDeadline, match="method check"):
        gpu_plan.checks.run("compile_concurrency", "method check compile_concurrency", "log", 16)


def test_every_job_that_holds_the_device_or_a_compile_slot_checks_the_time_limit_first():
    """A job Snakemake starts runs to its end after the session's SIGTERM: each rule that holds the `timed_run`
    pool or a compile slot gives its job its estimate (`expected_s`; a cold compile's is its last argument; a
    method check asks in the plan), so that a call ends by its limit (measure/jobs.py in_time)."""
    text = "\n".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    rules = dict(re.findall(r"^rule (\w+):\n(.*?)(?=^rule |\Z)", text, re.S | re.M))
    holding = {name for name, body in rules.items() if "timed_run=" in body or "P.compile.job" in body}
    assert {"train_run", "cold_compile", "parity", "method_check", "measure_peak", "mlp_claim"} <= holding
    for name in holding:
        asks = ("expected_s=", "C.expected_seconds(", "P.checks.run(")
        assert any(a in rules[name] for a in asks), name
