"""The pool of a GPU kind (compile_study/aggregate/compare/pool.py): Paule-Mandel's tau^2, the pooled mean and the
prediction interval for a new host, where a study's cells sit in it, a simulation of its verdicts, and the
stored studies each judged against the pool without it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from compile_study.aggregate.compare import hosts, pool, reruns

from .conftest import REPO

KIND = "NVIDIA H200"
# the host effect (tau, log units) and a process's scatter per class, as the stored H200 studies measured them
# (hosts.estimate over reference/h200-*: 0.7%, 4.0%, 8.7%, 1.4%; a process's SD of its log speedup 0.5-5%)
MEASURED = {"eager against eager": (0.007, 0.01), "compiled over host-bound eager": (0.040, 0.03),
            "compiled waits on the host": (0.087, 0.05), "device-bound": (0.014, 0.005)}
CONFIG = {"eager against eager": (512, "eager", 1.0), "compiled over host-bound eager": (32, "reduce-overhead", 3.0),
          "compiled waits on the host": (512, "default", 1.4), "device-bound": (512, "max-autotune", 1.75)}


def cell(study: str, batch: int, mode: str, logs: np.ndarray, idle: float, eager_idle: float,
         band: float = 1.02) -> dict:
    """One study's cell of one configuration, as pool.cells_of makes it, from its processes' log speedups."""
    return {"shape_regime": "static", "precision": "bf16", "batch_size": batch, "compile_mode": mode,
            "compile_scope": "module", "n": len(logs), "mean": float(logs.mean()),
            "se2": float(logs.var(ddof=1) / len(logs)), "idle": idle, "eager_idle": eager_idle,
            "aa_low": 1 / band, "aa_high": band, "protocol": "same", "study": study}


def drawn(rng, name: str, study: str, n: int = 3, shift: float = 0.0) -> dict:
    """A study's cell of the class `name` on a host of its own: the host's effect drawn with the class's tau."""
    tau, sd = MEASURED[name]
    batch, mode, speedup = CONFIG[name]
    logs = np.log(speedup) + shift + rng.normal(0, tau) + rng.normal(0, sd, n)
    idle = {"compiled waits on the host": 1.3}.get(name, 1.0)
    return cell(study, batch, mode, logs, idle, 6.8 if batch < 512 else 1.02)


@pytest.mark.unit
def test_paule_mandel_is_the_excess_variance_where_every_study_is_as_precise():
    """Equal standard errors: the weighted sum of squares is sum (y - mean)^2 / (v + tau^2), so tau^2 = var(y) - v."""
    y = np.array([0.1, 0.3, 0.2, 0.5])
    assert pool.paule_mandel(y, np.full(4, 0.001)) == pytest.approx(y.var(ddof=1) - 0.001, rel=1e-9)
    assert pool.paule_mandel(y, np.full(4, 1.0)) == 0.0  # the studies agree within their own errors
    v = np.array([0.001, 0.004, 0.002, 0.01])
    tau2 = pool.paule_mandel(y, v)
    w = 1 / (v + tau2)
    assert (w * (y - (w * y).sum() / w.sum()) ** 2).sum() == pytest.approx(3, rel=1e-9)


@pytest.mark.unit
def test_the_prediction_interval_is_higgins_thompson_spiegelhalter_s_and_borrows_the_class_s_tau_below_three():
    y, v = np.array([0.1, 0.3, 0.2, 0.5]), np.full(4, 0.001)
    p = pool.combine(y, v)
    tau2 = y.var(ddof=1) - 0.001
    se = np.sqrt((0.001 + tau2) / 4)
    assert p["tau2_from"] == "own" and p["df"] == 2 and p["mean"] == pytest.approx(y.mean())
    assert p["pi_high"] - p["mean"] == pytest.approx(sps.t.ppf(0.975, 2) * np.sqrt(tau2 + se ** 2))
    assert p["ci_high"] - p["mean"] == pytest.approx(sps.norm.ppf(0.975) * se)
    two = pool.combine(y[:2], v[:2], tau2=0.01, df=9)
    assert two["tau2_from"] == "class" and two["tau2"] == 0.01 and two["df"] == 9
    assert two["pi_high"] - two["mean"] == pytest.approx(sps.t.ppf(0.975, 9) * np.sqrt(0.01 + (0.011 / 2)))
    three = pool.combine(y[:1], v[:1], tau2=0.01, df=9, within_df=2)  # one study of three processes
    # a new host's spread: tau^2 twice (the study's own host and the new one) and the study's processes' 0.001
    welch = 0.021 ** 2 / (0.02 ** 2 / 9 + 0.001 ** 2 / 2)  # Welch-Satterthwaite: the class's df and its own
    assert three["df"] == pytest.approx(welch)
    assert three["ci_high"] - three["mean"] == pytest.approx(sps.t.ppf(0.975, 2) * np.sqrt(0.011))
    assert three["pi_high"] - three["mean"] == pytest.approx(sps.t.ppf(0.975, welch) * np.sqrt(0.021))
    alone = pool.combine(y[:1], v[:1])  # one study, no class estimate: no prediction for a new host
    assert alone["tau2_from"] == "none" and np.isnan(alone["pi_low"]) and alone["mean"] == 0.1


def a_pool(rng, k: int = 5) -> pd.DataFrame:
    return pd.DataFrame([drawn(rng, name, f"s{i}") for i in range(k) for name in MEASURED])


@pytest.mark.unit
def test_a_cell_is_placed_inside_above_or_below_and_the_pool_never_holds_the_study_it_judges():
    rng = np.random.default_rng(1)
    cells = a_pool(rng)
    mine = pd.DataFrame([drawn(rng, name, "new") for name in MEASURED])
    mine.loc[mine.compile_mode == "max-autotune", "mean"] += np.log(1.3)
    mine.loc[mine.compile_mode == "eager", "mean"] -= np.log(1.3)
    placed = pool.place(mine, pd.concat([cells, mine]), leave_out="new").set_index("compile_mode")
    assert (placed.k == 5).all() and not any("new" in s for s in placed.studies)
    assert placed.loc["max-autotune", "place"] == "above" and placed.loc["max-autotune", "verdict"] == "differs (faster)"
    assert placed.loc["eager", "place"] == "below" and placed.loc["eager", "verdict"] == "differs (slower)"
    pooled = pool.pooled(cells).set_index("compile_mode")
    assert pooled.loc["max-autotune", "verdict"] == "faster" and pooled.loc["eager", "verdict"] == "within eager's band"
    other = mine.assign(protocol="other")  # a configuration pools only cells of the judged study's protocol
    assert pool.place(other, cells).empty


@pytest.mark.unit
def test_a_kind_with_one_study_gives_no_prediction_and_says_why():
    rng = np.random.default_rng(2)
    cells = a_pool(rng, k=1)
    placed = pool.place(pd.DataFrame([drawn(rng, name, "new") for name in MEASURED]), cells)
    assert (placed.place == "none").all() and (placed.reason == pool.NO_PREDICTION).all()
    assert (pool.pooled(cells).verdict == "no prediction").all()


@pytest.mark.property  # a simulation of the rule: the statistical properties' tier
def test_a_faithful_study_rarely_differs_from_the_pool_and_a_1_3x_shift_of_a_device_bound_cell_is_caught():
    """Pools of five studies, each on a host of its own drawn with its class's measured host effect, three
    processes each; a sixth study on another host: "differs" in at most 5% per configuration; the same study with
    its device-bound cell 1.3x faster or slower: "differs" in at least 80%."""
    rng = np.random.default_rng(7)
    faithful, shifted = {name: 0 for name in MEASURED}, 0
    runs = 200
    for i in range(runs):
        cells = a_pool(rng)
        mine = pd.DataFrame([drawn(rng, name, "new") for name in MEASURED])
        verdicts = pool.place(mine, cells).set_index("compile_mode").verdict
        for name in MEASURED:
            faithful[name] += verdicts[CONFIG[name][1]].startswith("differs")
        sign = 1 if i % 2 else -1
        moved = pd.DataFrame([drawn(rng, "device-bound", "new", shift=sign * np.log(1.3))])
        shifted += pool.place(moved, cells).verdict.iloc[0].startswith("differs")
    print("\nfalse 'differs' per configuration: " + "; ".join(f"{k} {v / runs:.3f}" for k, v in faithful.items())
          + f"; a 1.3x shift caught {shifted / runs:.3f}")
    assert max(faithful.values()) <= 0.05 * runs
    assert shifted >= 0.8 * runs


@pytest.fixture(scope="module")
def stored_pools() -> dict[str, tuple[dict, pd.DataFrame]]:
    """Every GPU kind's stored studies and its pool's cells (what host-effect.json's `pools` hold)."""
    found = {kind: studies for kind, studies in reruns.stored(REPO).items() if kind.startswith("NVIDIA")}
    return {kind: (studies, pool.members({"pools": {kind: pool.entry(studies)}}, kind))
            for kind, studies in found.items()}


@pytest.mark.golden
def test_each_stored_study_left_out_of_its_kind_s_pool_differs_nowhere_the_host_spread_explains(stored_pools):
    assert {"NVIDIA H200", "NVIDIA H100 80GB HBM3"} <= set(stored_pools)
    for kind, (studies, cells) in stored_pools.items():
        assert set(cells.study) == set(studies)
        for name in studies:
            placed = pool.place(cells[cells.study == name], cells, leave_out=name)
            assert not placed.verdict.str.startswith("differs").any(), (kind, name, placed)
            assert not any(name in s for s in placed.studies)
            if len(studies) - 1 < 2:  # one other study: no host effect of the kind, no prediction
                assert (placed.reason == pool.NO_PREDICTION).all()
            else:
                # a cell may sit beyond the prediction interval by less than the margin (the A/A cells' intervals
                # are narrow): never a "differs" (above), and most cells inside
                assert len(placed) >= 7 and (placed.place == "inside").sum() >= len(placed) - 1
    studies, cells = stored_pools["NVIDIA H200"]
    assert len(studies) >= 3
    pooled = pool.pooled(cells).set_index(list(hosts.KEY))
    # bs512 `default` reads 1.21-1.67x across hosts: its prediction interval holds eager's band
    assert pooled.loc[("static", "bf16", 512, "default", "module"), "verdict"] == "within eager's band"
    assert pooled.loc[("static", "bf16", 512, "reduce-overhead", "module"), "verdict"] == "faster"


@pytest.mark.unit
def test_a_study_s_cells_read_from_its_summary_are_those_of_its_records():
    """The paper has summary.csv, not the records: the mean log speedup and its squared standard error read back
    from the t interval are the records' own, and so are both sides' paces (to the profiled process's median)."""
    from compile_study.aggregate.compare import compare as cmp

    study = REPO / "reference/h200-quick-2026-12-05b"
    from_records = pool.cells_of(cmp.load(study).records).set_index(pool.KEY)
    from_summary = pool.cells_from_summary(pd.read_csv(study / "summary.csv")).set_index(pool.KEY)
    assert set(from_summary.index) == set(from_records.index)
    both = from_records.merge(from_summary, left_index=True, right_index=True, suffixes=("", "_s"))
    assert np.allclose(both["mean"], both.mean_s, atol=1e-9) and np.allclose(both.se2, both.se2_s, rtol=1e-6)
    assert (both.n == both.n_s).all() and np.allclose(both.eager_idle, both.eager_idle_s, rtol=0.05)


@pytest.mark.unit
def test_the_answer_names_the_fastest_and_the_soonest_to_pay_back_among_those_not_shown_slower():
    from compile_study.aggregate import advice

    def row(mode, point, low, high, verdict, cold, warm):
        return {"shape_regime": "static", "precision": "bf16", "batch_size": 512, "compile_mode": mode,
                "compile_scope": "module", "speedup": point, "speedup_low": low, "speedup_high": high,
                "speedup_n": 3, "speedup_method": "95% t, n = 3", "verdict": verdict, "status": "ok",
                "break_even_steps": cold, "portable_break_even_steps": np.nan, "warm_break_even_steps": warm}

    summary = pd.DataFrame([row("default", 1.57, 1.26, 1.96, "faster", 2000, 300),
                            row("reduce-overhead", 1.74, 1.73, 1.75, "faster", 2500, 450),
                            row("max-autotune", 1.70, 1.69, 1.71, "faster", 40000, 350),
                            row("max-autotune-no-cudagraphs", 1.2, 1.15, 1.25, "faster", 100, 50),
                            row("eager", 1.0, 0.99, 1.01, "aa", np.nan, np.nan)])
    summary["n_ok"] = 3
    (found,) = advice.answers(summary, "bf16", None, 0)
    assert found["fastest"]["mode"] == "reduce-overhead" and not found["pooled"]
    assert {c["mode"] for c in found["peers"]} == {"reduce-overhead", "default"}  # max-autotune shown slower
    assert found["cheapest"]["cold"]["mode"] == "default" and found["cheapest"]["warm"]["mode"] == "default"
    assert found["cheapest"]["portable"] is None
    assert [k["mode"] for k in advice.recommended([found])] == ["reduce-overhead", "default"]
    pooled = [{"shape_regime": "static", "precision": "bf16", "batch_size": 512, "compile_mode": m,
               "compile_scope": "module", "k": 4, "processes": 12, "mean": np.log(p), "ci_low": np.log(p) - 0.05,
               "ci_high": np.log(p) + 0.05, "verdict": v}
              for m, p, v in (("default", 1.4, "within eager's band"), ("reduce-overhead", 1.75, "faster"),
                              ("max-autotune", 1.70, "faster"))]
    (found,) = advice.answers(summary, "bf16", pooled, 4)  # the pool speaks: default is held within eager's band
    assert found["pooled"] and found["fastest"]["mode"] == "reduce-overhead"
    assert "default" not in {c["mode"] for c in found["peers"]} and found["held"][0]["mode"] == "default"
    assert not advice.answers(summary, "bf16", pooled, 1)[0]["pooled"]  # one other study: this host alone
