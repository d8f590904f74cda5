"""Where the estimate's numbers come from: Snakemake's own time from the stored studies' logs, the host-only
rules, the run order that hides loads, and the compile phase's factor at the plan's compiles at once."""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path

import pytest

from compile_study.aggregate.estimate import at_once, costs, estimate, schedule, snakemake_time, walltime
from compile_study.aggregate.estimate.snakemake_time import CallTime
from compile_study.core import compile_record, record
from compile_study.core.config import grid
from compile_study.core.layout import Layout
from compile_study.core.record import RunConfig, RunKey
from compile_study.plan.study import Plan

from .conftest import REPO
from .test_walltime import CALL, LOG, START, run_record

pytestmark = pytest.mark.unit


def test_a_calls_snakemake_time_is_its_start_its_exit_and_the_seconds_between_its_jobs():
    """The log of test_walltime: Snakemake starts its first job 5 s into the call, the run's record places it at
    11-19 s (its log interval 10-20 s), the last job ends 2 s before the call: idle 0-5, 9-11 and 28-30 s."""
    run = run_record(8.0, window=[START + 11, START + 19])
    log = LOG.replace("study plan:", "total              4\nstudy plan:")
    t = snakemake_time.call_time(CALL | {"exit_status": 0}, log, {"runs/static/fp32/eager/module/bs8/r0.json": run})
    assert (t.start_s, t.exit_s, t.between_s, t.jobs, t.dag) == pytest.approx((5.0, 2.0, 2.0, 3, 4))
    stopped = snakemake_time.call_time(CALL | {"exit_status": 1, "stopped_by": "time limit"}, log, {})
    assert stopped.exit_s is None and stopped.between_s == pytest.approx(1.0)  # 9-10 s: the run's log interval


def test_the_start_is_the_largest_dags_the_exit_the_median_and_the_rest_per_job(monkeypatch):
    calls = [CallTime(12.0, None, 1.0, 60, 135), CallTime(6.0, 3.0, 2.0, 40, 40), CallTime(8.0, 2.0, 1.0, 20, 47),
             CallTime(5.0, 2.5, 0.0, 0, 10)]
    monkeypatch.setattr(snakemake_time, "logged_calls", lambda *a: calls)
    own = snakemake_time.learned([], "cuda")
    assert (own.start_s, own.exit_s, own.per_job_s, own.calls) == pytest.approx((12.0, 2.5, 4.0 / 120, 4))
    assert own.seconds(100) == pytest.approx(12.0 + 2.5 + 100 * 4.0 / 120)
    monkeypatch.setattr(snakemake_time, "logged_calls", lambda *a: [])
    prior = snakemake_time.learned([], "cpu")
    assert (prior.start_s, prior.per_job_s, prior.calls) == (snakemake_time.PRIOR_START_S["cpu"],
                                                             snakemake_time.PRIOR_PER_JOB_S, 0)


def test_the_stored_h200_studies_give_snakemake_12_s_to_start_2_8_s_to_exit_and_0_02_s_a_job(monkeypatch):
    monkeypatch.chdir(REPO)
    own = snakemake_time.learned(sorted(REPO.glob("reference/h200-*")), "cuda")
    assert own.calls == 7  # the full study's three calls and the four quick studies' (hf-bert: another model)
    assert own.start_s == pytest.approx(12.0)  # the full study's first call, 135 jobs in its DAG
    assert own.exit_s == pytest.approx(2.8, abs=0.05)
    assert own.per_job_s == pytest.approx(0.020, abs=0.002)


def test_a_gpu_study_prices_the_pdf_from_the_cpu_studys_log_and_counts_its_reproduction_report(monkeypatch):
    """No stored GPU study made a PDF: the 2-core CPU study's paper_pdf job (its logged seconds) prices it, not the
    15-s prior;
    a rule that uses the device (the MLP claim) is never taken from another device's logs."""
    monkeypatch.chdir(REPO)
    studies = costs.stored_studies()
    gpu = costs.known_jobs(studies, "cuda")
    logged = estimate.logged_jobs(studies, "cuda")
    cpu = costs.known_jobs(studies, "cpu")
    assert not gpu.get("paper_pdf") and logged["paper_pdf"] == cpu["paper_pdf"] and len(cpu["paper_pdf"]) >= 1
    assert logged["mlp_claim"] == gpu["mlp_claim"] and logged["reproduction"] == gpu["reproduction"]
    assert estimate.job_seconds("paper_pdf", logged) == pytest.approx(statistics.median(cpu["paper_pdf"]))
    assert estimate.job_seconds("paper_pdf", logged) < estimate.PRIOR_JOB_S["paper_pdf"]
    config = grid.load_config([REPO / "config.yaml"])
    for device, reports in (("cuda", 1), ("cpu", 0)):  # yardstick.cuda names the stored GPU study; cpu none
        runs = grid.expand(config["grids"][device])
        assert estimate.config_jobs(config, runs, device, pdf=True)["reproduction"] == reports
    e, _ = estimate.config_estimate(config, "cuda", Layout("results/no-study"), pdf=True)
    assert e["other_s"]["reproduction"] == pytest.approx(statistics.median(gpu["reproduction"]))


def test_an_mlp_claim_of_batch_sizes_a_study_ran_is_priced_as_that_studys_whole_job(monkeypatch):
    """The claim's sizes are not alike: a kick-the-tires study's one size at batch 64 was mostly its job's start
    (24 s, the first job of its call), the full study's two sizes took 20 s. The full grid's claim is the full
    study's job (calibrated), not twice the kick-the-tires one; sizes no study ran are priced per size."""
    monkeypatch.chdir(REPO)
    logged = estimate.logged_jobs(costs.stored_studies(), "cuda")
    full = grid.load_config([REPO / "config.yaml"])["claims"]["mlp"]["cuda"]["batch_sizes"]
    assert full == [64, 8192] and costs.mlp_rule(full) == "mlp_claim:64+8192"
    whole = logged[costs.mlp_rule(full)]
    assert len(whole) == 1 and 15 < whole[0] < 30  # h200-full-2026-12-03's one job, scaled to the newer studies
    assert estimate.job_seconds(costs.mlp_rule(full), logged, 2) == pytest.approx(whole[0])
    assert estimate.job_seconds(costs.mlp_rule(full), logged, 2) < 2 * statistics.median(logged["mlp_claim"])
    assert estimate.job_seconds("mlp_claim:3+5", logged, 2) == pytest.approx(2 * statistics.median(logged["mlp_claim"]))
    assert not estimate.logged_jobs(costs.stored_studies(), "cpu").get("mlp_claim:3+5")


def test_the_timer_check_is_priced_per_case(monkeypatch):
    """The timer check times its cases one after another in one process: the stored GPU study's job held three
    (before eager at batch 512 joined, its CHECK's cases), the H100 grid's four, so a case is a job over its cases (the
    newest study's first), and today's plan of four
    cases is priced four times that; the deadline asks the same of the job."""
    from compile_study.measure.checks.timer_check import CHECK

    monkeypatch.chdir(REPO)
    stored = REPO / "reference/h200-full-2026-12-03"
    assert costs.PER_UNIT["method_check:timer_check"](stored) == 3
    logged = estimate.logged_jobs(costs.stored_studies(), "cuda")
    per_case = statistics.median(logged["method_check:timer_check"])
    whole = {study: [(j.end - j.start) / costs.PER_UNIT["method_check:timer_check"](study)
                     for jobs in walltime.logged_jobs(study) for j in jobs
                     if j.rule == "method_check" and j.output.endswith("timer_check.json") and j.end]
             for study in costs.stored_studies()}
    assert len(whole[Path("reference/h200-full-2026-12-03")]) == 1  # a case: a finished job over its cases
    assert any(per_case == pytest.approx(x, rel=0.3) for found in whole.values() for x in found)
    config = grid.load_config([REPO / "config.yaml"])
    jobs = estimate.config_jobs(config, grid.expand(config["grids"]["cuda"]), "cuda", pdf=False)
    assert jobs["method_check:timer_check"] == len(CHECK.cases["cuda"]) == 4
    assert jobs["method_check:compile_concurrency"] == 1
    e, _ = estimate.config_estimate(config, "cuda", Layout("results/no-study"), pdf=False)
    assert e["other_s"]["method_check:timer_check"] == pytest.approx(4 * per_case)


def test_a_long_load_goes_beside_a_long_timed_part():
    """(seconds, of them the load): B loads for 8 s, A and D time for 9 and 8 s. Run first, B's load shows
    whole; the order puts it beside a long timed part, down to the bound (every timed part and the least load)."""
    a, b, c, d = (10.0, 1.0), (9.0, 8.0), (2.0, 1.0), (9.0, 1.0)
    runs = [b, c, a, d]
    assert schedule.wall(runs, range(4)) == pytest.approx(8 + 1 + 1 + 9 + 8) == estimate.runs_wall(runs, True)
    order = schedule.run_order(runs)
    assert schedule.wall(runs, order) == pytest.approx(19 + 1) == estimate.runs_wall([runs[i] for i in order], True)
    assert order.index(0) > 0 and runs[order[order.index(0) - 1]][0] - runs[order[order.index(0) - 1]][1] >= 8
    two = runs + [(3.0, 2.0), (4.0, 1.0)]  # two lanes: the runs dealt in turn, as estimate.runs_wall deals them
    order = schedule.run_order(two, lanes=2)
    assert schedule.wall(two, order, 2) == pytest.approx(estimate.runs_wall([two[i] for i in order], True, 2))
    assert schedule.wall(two, order, 2) <= estimate.runs_wall(two, True, 2)
    assert sorted(order) == list(range(6)) and schedule.run_order([]) == []


def test_the_gpu_grid_hides_more_of_its_loads_in_the_order_than_in_the_grids(monkeypatch):
    """grids.cuda from the stored records (newest studies first, any GPU kind): 531 s of runs, 246 s of
    them loads; in the grid's order their wall is 351 s, in run_order's 297 s, 11 s above the bound (the timed
    parts and the least load)."""
    monkeypatch.chdir(REPO)
    config = grid.load_config([REPO / "config.yaml"])
    keys = list(grid.expand(config["grids"]["cuda"]))
    known = costs.known_runs(costs.plan_records(Layout("results/no-study")), "cuda", config["model"])
    runs = [(estimate.run_seconds(k, "cuda", known)[0], estimate.load_seconds(k, "cuda", known)) for k in keys]
    bound = sum(s - load for s, load in runs) + min(load for _, load in runs)
    assert estimate.runs_wall(runs, True) == pytest.approx(351, abs=1)
    assert estimate.ordered_wall(runs, True) == pytest.approx(297, abs=1) and bound == pytest.approx(286, abs=1)
    assert estimate.ordered_wall(runs, False) == pytest.approx(sum(s for s, _ in runs))  # nothing overlaps
    e, _ = estimate.config_estimate(config, "cuda", Layout("results/no-study"), pdf=True)
    assert e["hidden_s"] == pytest.approx(e["runs_s"] - estimate.ordered_wall(runs, True))


def test_the_plan_gives_the_runs_priorities_in_that_order_below_the_compile_phases(tmp_path, monkeypatch):
    from .test_plan import SHIPPED, workflow

    monkeypatch.chdir(REPO)  # the stored studies price the runs
    P = Plan(workflow(), copy.deepcopy(SHIPPED) | {"device": "cuda", "yardstick": {"cuda": None}})
    assert P.lanes.overlap
    known = P.timed._known_runs
    runs = [(estimate.run_seconds(k, "cuda", known)[0], estimate.load_seconds(k, "cuda", known)) for k in P.runs]
    ranked = sorted(P.runs, key=lambda k: -P.timed.priority(k._asdict()))
    assert [list(P.runs).index(k) for k in ranked] == schedule.run_order(runs)
    assert all(1 < P.timed.priority(k._asdict()) <= 9 < 10 for k in P.runs)
    monkeypatch.setitem(P.lanes.__dict__, "overlap", False)  # (a cached property)
    assert P.timed.priority(ranked[0]._asdict()) == 0  # nothing to hide: Snakemake's own order


def _check(root, name: str, ratio: float, k: int, device: str = "cuda") -> None:
    (root / name / "checks").mkdir(parents=True)
    (root / name / "checks" / "compile_concurrency.json").write_text(json.dumps(
        {"applicable": True, "device": device, "k": k, "summary": {"ratio": ratio}}))


def test_the_at_once_factor_is_the_checks_at_their_k_and_scaled_by_the_measured_slowdown_elsewhere(tmp_path):
    """The stored checks measured 1.42 at 8 at once; outside the study a compile's slowdown grew from 1.13 at 8 to
    1.26 at 16 (measured outside the study): 16 at once is priced at twice the excess, 1.83, until a study measures it."""
    assert at_once.factor_at(1, {8: 1.42}) == 1.0 and at_once.factor_at(8, {8: 1.42}) == pytest.approx(1.42)
    g8, g16 = 22.5 / 19.9, 25.0 / 19.9
    assert at_once.slowdown(8) == pytest.approx(g8) and at_once.slowdown(12) == pytest.approx((g8 + g16) / 2)
    assert at_once.factor_at(16, {8: 1.42}) == pytest.approx(1 + 0.42 * (g16 - 1) / (g8 - 1)) == pytest.approx(1.83, abs=0.01)
    assert at_once.factor_at(12, {8: 1.4, 16: 1.6}) == pytest.approx(1.5)  # between two measured k: a line
    assert at_once.factor_at(16, {8: 1.4, 15: 1.6}) > 1.6  # past the last measured k: scaled from it
    assert at_once.factor_at(8, {}) == at_once.AT_ONCE
    for name, ratio, k in [("a", 1.4, 8), ("b", 1.5, 8), ("c", 1.7, 16)]:
        _check(tmp_path, name, ratio, k)
    _check(tmp_path, "d", 3.0, 1, device="cpu")
    assert at_once.checks(str(tmp_path), "cuda", kept=None) == pytest.approx({8: 1.45, 16: 1.7})
    assert at_once.at_once_factor(str(tmp_path), "cuda", 16) == pytest.approx(1.7)
    assert at_once.at_once_factor(str(tmp_path), "cuda") == pytest.approx(1.575)  # no k: the median of the ks'


def test_a_compile_record_is_priced_alone_by_the_factor_at_its_own_at_once_and_the_phase_at_the_plans(tmp_path,
                                                                                                       monkeypatch):
    key = RunKey("default", "module", 32, "static", "bf16", 0)
    for i, k in enumerate([8, 2, 1]):
        r = record.new(RunConfig("default", 32, "static", "bf16", 0, compile_scope="module"), {},
                       {"device_type": "cuda"})
        r |= {"kind": compile_record.KIND, "status": "ok", "compile": {"at_once": k},
              "metrics": {"overhead_s": {"total_s": 28.4}}}
        (tmp_path / f"c{i}.json").write_text(json.dumps(r))
    cold = costs.known_compiles([str(tmp_path / "c*.json")], "cuda", factor=lambda k: at_once.factor_at(k, {8: 1.42}))
    f2 = at_once.factor_at(2, {8: 1.42})
    assert 1 < f2 < 1.42 and sorted(cold[(key, ("cold",))]) == pytest.approx(sorted([20.0, 28.4 / f2, 28.4]))
    monkeypatch.chdir(REPO)
    config = grid.load_config([REPO / "config.yaml"])
    e8, slots8 = estimate.config_estimate(config, "cuda", Layout("results/no-study"), pdf=True)
    one = copy.deepcopy(config)
    one["compile_phase"]["cuda"]["cores_per_compile"] = 1  # sixteen at once on the 16-core host
    e16, slots16 = estimate.config_estimate(one, "cuda", Layout("results/no-study"), pdf=True)
    assert (slots8, slots16) == (8, 16)
    # measured (benchmarks/compile-at-once): a compile among 15 others took 2.78x its time alone, among 8 1.38x;
    # a phase's seconds per compile, factor / k, are the same within 3%: one core per compile buys nothing
    measured = at_once.checks("reference", "cuda", kept=at_once.MEASURED_DIR)
    assert measured[16] == pytest.approx(2.777, abs=0.001)
    ratio = at_once.factor_at(16, measured) / 16 / (at_once.factor_at(8, measured) / 8)
    assert ratio == pytest.approx(0.98, abs=0.01)
    assert e16["compile_s"] == pytest.approx(e8["compile_s"], rel=0.05)


def test_the_kept_at_once_checks_are_what_their_readme_says():
    """benchmarks/compile-at-once/README.md's table against its records: k, cores each, the ratio with its
    interval and the seconds among others and alone."""
    folder = REPO / "benchmarks" / "compile-at-once"
    text = (folder / "README.md").read_text()
    for name, at, cores in [("k8", 8, 2), ("k16", 15, 1)]:
        c = json.loads((folder / f"{name}.json").read_text())
        assert c["applicable"] and c["device"] == "cuda" and c["cores_per_compile"] == cores
        assert {p["at_once"] for p in c["phase"]} == {at} and len(c["phase"]) == len(c["alone"]) == 3
        among = [p["cold_compile_s"] for p in c["phase"]]
        alone = [p["cold_compile_s"] for p in c["alone"]]
        s = c["summary"]
        row = (f"| `{name}.json` | {at} | {cores} | {s['ratio']:.2f}× [{s['low']:.2f}, {s['high']:.2f}] | "
               f"{min(among):.1f}–{max(among):.1f} | {min(alone):.1f}–{max(alone):.1f} |")
        assert row in text
        assert s["ratio"] == pytest.approx(statistics.geometric_mean(among) / statistics.geometric_mean(alone))


def test_a_portable_start_never_recorded_is_priced_from_its_configurations_compile_job_and_warm_load():
    """fixed (a cold compile job's cost besides its compile, as if alone) + the runs' warm-cache load x 2.53/2.15
    (artifacts into an empty cache against a local warm cache, on an H200 outside the study); the prior without."""
    key = RunKey("default", "module", 32, "static", "bf16", 0)
    known = {(key, ("fixed",)): [2.0, 2.4]}
    assert estimate.compile_seconds(key, "cuda", known, "portable", 3.0) == pytest.approx(2.2 + 3.0 * 2.53 / 2.15)
    assert estimate.compile_seconds(key, "cuda", known, "portable") == estimate.PRIOR_COMPILE_S["cuda"]["portable"]
    assert estimate.compile_seconds(key, "cpu", known, "portable", 3.0) == estimate.PRIOR_COMPILE_S["cpu"]["portable"]
    recorded = known | {(key, ("portable",)): [4.0]}
    assert estimate.compile_seconds(key, "cuda", recorded, "portable", 3.0) == 4.0  # a record says
    assert estimate.warm_seconds(key, {("warm", (key, (True, True))[:-1]): [3.0, 5.0]}) == 4.0
