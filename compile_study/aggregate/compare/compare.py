"""Did a study reproduce a stored one? Configuration by configuration, by a stated rule (torch-free).

    from compile_study.aggregate.compare.compare import compare, load
    result = compare(load("reference/<name>"), load("results/cuda"), names=("reference/<name>", "results/cuda"))

(report/compare/reproduction.py writes the report and is the command line: `python -m compile_study compare`.)

Both sides are read from their run records (core/record.py) and data facts (facts.json); a configuration is the
summary's (shape regime, precision, batch size, compile mode, scope). Before any verdict, what the two measured is
established (aggregate/compare/measured.py): a difference in the data (source, input sha256, vocabulary, rows available or
used) makes every configuration "not comparable", a difference in a configuration's protocol (timed steps, block,
warm-up, epoch cap, recompile limit, fp32 matmul precision, TF32) that configuration; `allow_different_data`
gives the verdicts on different data anyway, each marked so. Per configuration present on both sides and
comparable, from each side's per-process speedups (in_process_speedup, the unit the study's intervals are made of):

  ratio    = exp(mean log speedup of the study - mean log speedup of the stored study)
  interval = the 95% t interval of that difference of means, its variance that of both sides' means (Welch) plus
             twice the host effect's (aggregate/compare/hosts.py: each study ran on a host of its own, and hosts of one
             kind differ by tau in log speedup, estimated from the stored studies per class of configuration,
             the class from the mode and how long each side's profiled steps outlasted the GPU's
             work); Welch-Satterthwaite degrees of freedom, tau^2 counted as estimated on its class's degrees of
             freedom, and never narrower than Welch's interval alone. Without an estimate (another device kind,
             a class no stored studies share) tau is 0: Welch's interval (scipy.stats.ttest_ind's)
  margin   = the larger of the two cells' A/A bands (core/stats.aa_band: how far one eager-vs-eager process
             strays by chance on that host), and at least MIN_MARGIN; a cell without eager runs leaves the
             other side's band

Verdict, in this order:
  inconclusive (the stored cell is too uncertain (n < 3))   the stored side has fewer than 3 successful processes
  inconclusive (n < 3)              this study has fewer than 3
  inconclusive (no A/A control)     neither side has an A/A band for the cell
  differs (faster / slower)         the interval excludes 1 and the ratio lies beyond the margin (the study's
                                    speedup is larger / smaller than the stored one's): beyond what the two
                                    hosts and both sides' processes explain
  reproduced                        the interval lies within [1/T, T], T = max(1.3, margin): a shift of 1.3x
                                    (the shift the rule must detect) or more is ruled out
  inconclusive, otherwise, saying why:
    the stored cell is too uncertain   the stored cell's own 95% t interval reaches past [1/T, T] about its
                                       point: no rerun could show it reproduced, and only a large shift differs
    hosts differ too much here         the host effect is the largest part of the interval's variance: one rerun
                                       on another host cannot tell a 1.3x shift from the host
    interval too wide                  the two sides' processes scatter too much: rerun with more repeats
tests/test_compare.py simulates pairs of studies, each study on a host of its own drawn with the class's
estimated host effect: on pairs drawn from one distribution the rule says "differs" in at most 5% of them, and
where the host effect is small it calls a real 1.3x shift "differs" in at least 80% at n = 3 per side.

Absolute step times depend on the host (its CPU above all where the step is launch-bound); the report gives
their ratio beside both hosts' GPU and CPU models, and judges speedups only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from compile_study.aggregate import summary
from compile_study.aggregate.compare import hosts, measured
from compile_study.core import record, stats
from compile_study.core.dataset.data import read_facts
from compile_study.core.layout import Layout, is_stored_study

LEVEL = 0.95  # of the interval on the difference of mean log speedups (aggregate/compare/hosts.py interval)
MIN_N = 3  # processes per side below which there is no verdict (as in core/stats.verdict)
TOLERANCE = 1.3  # "reproduced" must rule out a shift this large (the shift the rule must detect at n = 3)
# The smallest margin: a quiet host's A/A band can be under 0.1% (eager at batch 512 on one H200), while two
# hosts' same-process speedups of one configuration differ by more (reduce-overhead at batch 512: 1.74x and
# 1.75x, each over 3 processes): without a floor that half percent read "differs".
MIN_MARGIN = 1.02
KEY = [c for c in summary.CONFIG if c != "device_type"]  # a configuration, whichever host ran it
HOST_KEYS = ("device_name", "cpu_model")  # what absolute step times depend on
VERSION_KEYS = ("device_name", "cpu_model", "cpu_cores", "torch", "triton", "cuda", "driver", "python",
                "git_commit", "git_dirty")


# why a verdict is inconclusive, where the rule could have said "differs" (counts' `judged`): which part of the
# interval's variance kept it from ruling a 1.3x shift in or out
STORED_UNCERTAIN = "the stored cell is too uncertain"
HOST_UNCERTAIN = "hosts differ too much here"
TOO_WIDE = "interval too wide"
JUDGED_REASONS = (STORED_UNCERTAIN, HOST_UNCERTAIN, TOO_WIDE)


@dataclass(frozen=True)
class Judgement:
    """One configuration: the study's speedup over the stored one's, its interval, the margin and the verdict."""

    ratio: float  # geometric mean speedup of the study / that of the stored study
    low: float  # 95% interval of the ratio, the host effect included (NaN under MIN_N processes on either side)
    high: float
    margin: float  # the larger A/A band of the two cells (>= 1; NaN without any)
    verdict: str  # reproduced, differs (faster), differs (slower), inconclusive
    reason: str | None = None  # why inconclusive: n < 3, no A/A control, or one of JUDGED_REASONS
    host_sd: float = 0.0  # the host effect (tau, log units) the interval carries


def margin_of(*bands: tuple[float, float]) -> float:
    """The larger of the A/A bands [low, high] given (as a ratio >= 1), at least MIN_MARGIN; NaN where none is
    finite."""
    halves = [max(high, 1 / low) for low, high in bands if np.isfinite(low) and np.isfinite(high) and low > 0]
    return max(*halves, MIN_MARGIN) if halves else float("nan")


def uncertainty(stored_logs, study_logs, host_sd=0.0, margin: float = 1.0, level: float = LEVEL) -> str:
    """Which part keeps an interval from a verdict (JUDGED_REASONS): the stored cell where its own t interval
    reaches past [1/T, T] about its point (T = max(TOLERANCE, margin): then no rerun could show it reproduced),
    else the host effect where it is the largest part of the variance, else the two sides' processes."""
    a = np.asarray(stored_logs, float)
    va, vb, h = hosts.parts(a, study_logs, host_sd)
    if hosts.t_quantile(1 - (1 - level) / 2, len(a) - 1) * np.sqrt(va) > np.log(max(TOLERANCE, margin)):
        return STORED_UNCERTAIN
    return HOST_UNCERTAIN if h > max(va, vb) else TOO_WIDE


def decide(n: int, ratio: float, low: float, high: float, margin: float,
           why: str = TOO_WIDE) -> tuple[str, str | None]:
    """(verdict, reason) from the fewer processes of the two sides, the ratio, its interval, the margin and,
    should the interval rule nothing out, why (`uncertainty`)."""
    if n < MIN_N:
        return "inconclusive", f"n < {MIN_N}"
    if not np.isfinite(margin):
        return "inconclusive", "no A/A control"
    if (low > 1 or high < 1) and not 1 / margin <= ratio <= margin:
        return ("differs (faster)" if ratio > 1 else "differs (slower)"), None
    tolerance = max(TOLERANCE, margin)
    if 1 / tolerance <= low and high <= tolerance:
        return "reproduced", None
    return "inconclusive", why


def _logs(speedups) -> np.ndarray:
    v = np.array([np.nan if x is None else x for x in speedups], float)
    return np.log(v[np.isfinite(v) & (v > 0)])


def judge(stored_speedups, study_speedups, margin: float, host_sd: float = 0.0,
          host_df: float = np.inf) -> Judgement:
    """The verdict on one configuration from each side's per-process speedups, the A/A margin and the host
    effect (tau, log units, estimated on host_df degrees of freedom) of its class (the module docstring's rule)."""
    a, b = _logs(stored_speedups), _logs(study_speedups)
    n = min(len(a), len(b))
    ratio = float(np.exp(b.mean() - a.mean())) if n else float("nan")
    if len(a) < MIN_N:  # the yardstick's cell cannot carry a verdict, whatever this study measured
        return Judgement(ratio, np.nan, np.nan, margin, "inconclusive", f"{STORED_UNCERTAIN} (n < {MIN_N})", host_sd)
    if n < MIN_N:
        return Judgement(ratio, np.nan, np.nan, margin, *decide(n, ratio, np.nan, np.nan, margin), host_sd)
    low, high = (float(np.exp(x)) for x in hosts.interval(a, b, host_sd, host_df))
    return Judgement(ratio, low, high, margin,
                     *decide(n, ratio, low, high, margin, uncertainty(a, b, host_sd, margin)), host_sd)


def _distinct(values) -> str:
    found = sorted({str(v) for v in values if v is not None and v == v})
    return ", ".join(found) if found else "—"


def configurations(records: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: speedup interval, method, n and A/A band (core/stats), median step time, the host, the
    successful processes' speedups (what the verdict is computed from) and how far its profiled process's step
    outlasted the GPU's work, and eager's beside it (`idle`, `eager_idle`: aggregate/compare/hosts.py paces)."""
    table = stats.speedup_table(records, summary.CONFIG, summary.CELL)
    ok = records[records.status == "ok"].groupby(summary.CONFIG)
    idle = hosts.paces(records)  # which class of host effect (hosts.class_of)
    extra = pd.DataFrame({"step_ms": ok.steady_step_ms.median(),
                          "speedups": ok.in_process_speedup.agg(list),
                          **{k: ok[k].agg(_distinct) for k in HOST_KEYS}}).reset_index()
    return table.merge(extra, on=summary.CONFIG, how="left").join(idle, on=list(KEY))


SIDE_COLUMNS = {"speedup": "speedup", "speedup_low": "low", "speedup_high": "high", "speedup_method": "method",
                "speedup_n": "n", "aa_band_low": "aa_low", "aa_band_high": "aa_high", "step_ms": "step_ms",
                "device_name": "device", "cpu_model": "cpu"}


def _not_comparable(data: list[str], protocol: list[str], allow_different_data: bool) -> str | None:
    """Why a configuration gets no verdict: the data (unless allowed) and its protocol settings that differ."""
    parts = [f"data ({', '.join(data)})"] if data and not allow_different_data else []
    parts += [f"protocol ({'; '.join(protocol)})"] if protocol else []
    return "; ".join(parts) or None


def _row(key: tuple, a: pd.Series, b: pd.Series, data: list[str], allow_different_data: bool,
         effect: dict[str, dict]) -> dict:
    row = dict(zip(KEY, key))
    idle, eager = (max((x for x in (a[k], b[k]) if x == x), default=None) for k in ("idle", "eager_idle"))
    host_class, host_sd, host_df = hosts.sd_of(effect, row["batch_size"], row["compile_mode"], row["compile_scope"],
                                               idle, eager)  # either side's profiled processes
    j = judge(a.speedups if isinstance(a.speedups, list) else [], b.speedups if isinstance(b.speedups, list) else [],
              margin_of((a.aa_band_low, a.aa_band_high), (b.aa_band_low, b.aa_band_high)), host_sd, host_df)
    for side, s in (("stored", a), ("study", b)):
        row |= {f"{side}_{new}": s[old] for old, new in SIDE_COLUMNS.items()}
    protocol = measured.protocol_differences(a, b)
    why = _not_comparable(data, measured.protocol_words(a, b, protocol), allow_different_data)
    verdict, reason = ("not comparable", why) if why else (j.verdict, j.reason)
    return row | {"ratio": j.ratio, "ratio_low": j.low, "ratio_high": j.high, "margin": j.margin,
                  "host_class": host_class, "host_sd": host_sd, "host_sd_ratio": float(np.exp(host_sd)),
                  "host_df": host_df, "verdict": verdict, "reason": reason,
                  "different_data_allowed": bool(data) and not why,
                  "protocol_differs": ", ".join(measured.PROTOCOL[k] for k in protocol) or None,
                  "step_ratio": b.step_ms / a.step_ms}


@dataclass(frozen=True)
class Study:
    """One side of a comparison: its run records (record.table) and its data facts (facts.json; None: unknown)."""

    records: pd.DataFrame
    facts: dict | None


@dataclass(frozen=True)
class Comparison:
    table: pd.DataFrame  # one row per shared configuration (columns: KEY, stored_*, study_*, ratio, verdict, ...)
    only_stored: pd.DataFrame  # configurations (KEY columns) the stored study has and the study lacks
    only_study: pd.DataFrame
    versions: pd.DataFrame  # index VERSION_KEYS; columns stored, study, differs
    device_type: str
    data: pd.DataFrame  # what each side trained on (aggregate/compare/measured.py data_table): stored, study, differs
    allow_different_data: bool = False  # verdicts given where the data differ, each marked so
    host_kind: str | None = None  # the hosts' kind (both sides' GPU) whose host effect the verdicts carry
    host_effect: dict | None = None  # that kind's estimate per class (aggregate/compare/hosts.py); {} where none

    def counts(self) -> dict[str, int]:
        return counts(self.table)

    @property
    def data_differences(self) -> list[str]:
        """What differs in the two studies' data (measured.DATA's words); [] where they trained on the same."""
        return [measured.DATA[k] for k in self.data.index[self.data.differs]]


def counts(table: pd.DataFrame) -> dict[str, int]:
    """Shared configurations and how many of them are reproduced, differ, inconclusive, not comparable (from a
    comparison's table, or reproduction.csv read back: what a headline or a sentence of the paper quotes);
    `judged`: those where the rule could have said "differs" (every verdict but inconclusive for n < 3 or for
    want of an A/A control, and not comparable: an inconclusive one for one of JUDGED_REASONS)."""
    v = table.verdict.astype(str) if len(table) else pd.Series(dtype=str)
    reason = table.reason.astype(str) if len(table) and "reason" in table else pd.Series("", index=v.index)
    reproduced, differs, inconclusive = v == "reproduced", v.str.startswith("differs"), v == "inconclusive"
    too_wide = inconclusive & reason.isin(JUDGED_REASONS)
    return {"shared": len(table), "reproduced": int(reproduced.sum()), "differs": int(differs.sum()),
            "inconclusive": int(inconclusive.sum()), "not_comparable": int((v == "not comparable").sum()),
            "judged": int((reproduced | differs | too_wide).sum())}


# How often the rule calls one configuration of an exact reproduction "differs", at most (the bound that
# tests/test_compare.py's simulation holds it to): across many configurations some differ by chance alone.
FALSE_DIFFERS = 0.05


def chance_of_differs(judged: int, differs: int) -> float | None:
    """The largest chance that an exact reproduction shows `differs` or more "differs" among `judged`
    configurations, each wrong at most FALSE_DIFFERS of the time independently (binomial upper tail); None
    where nothing differs. Read beside the headline: one "differs" in many configurations is not, alone,
    evidence that the study failed to reproduce."""
    if differs <= 0 or judged <= 0:
        return None
    return float(sps.binom.sf(differs - 1, judged, FALSE_DIFFERS))


def device_of(records: pd.DataFrame, name: str) -> str:
    devices = sorted(set(records.device_type.dropna()))
    if len(devices) != 1:
        raise SystemExit(f"{name}: its records name {len(devices)} device types ({', '.join(devices)}), not one")
    return devices[0]


def _versions(stored: pd.DataFrame, study: pd.DataFrame) -> pd.DataFrame:
    def column(records):
        out = {k: _distinct(records[k]) for k in VERSION_KEYS}
        out["git_commit"] = _distinct(str(c)[:12] for c in records.git_commit.dropna())
        dirty = records.git_dirty.fillna(True).astype(bool)
        out["git_dirty"] = f"{int(dirty.sum())} of {len(records)} records"
        return out
    table = pd.DataFrame({"stored": column(stored), "study": column(study)})
    table["differs"] = table.stored != table.study
    # records made from a dirty tree differ by their count, not by the studies' sizes ("0 of 70" against "0 of 24")
    dirty = [int(records.git_dirty.fillna(True).astype(bool).sum()) for records in (stored, study)]
    table.loc["git_dirty", "differs"] = dirty[0] != dirty[1]
    return table


def host_kind(stored: pd.DataFrame, study: pd.DataFrame) -> str | None:
    """The one GPU (or CPU) model both studies' records name, whose hosts' effect the verdicts carry; None
    where they name several or differ (no host effect is known between kinds)."""
    names = [set(r.device_name.dropna()) for r in (stored, study)]
    return next(iter(names[0])) if len(names[0]) == 1 and names[0] == names[1] else None


def compare(stored: Study, study: Study, names: tuple[str, str] = ("stored", "study"),
            allow_different_data: bool = False, host_effect: dict | None = None) -> Comparison:
    """Two studies of the same device type -> what each measured, then the comparison, configuration by
    configuration (a configuration whose data or protocol differ is "not comparable"). `host_effect`: the
    stored estimate (aggregate/compare/hosts.py load's shape; None: reference/host-effect.json)."""
    devices = device_of(stored.records, names[0]), device_of(study.records, names[1])
    if devices[0] != devices[1]:
        raise SystemExit(f"{names[1]} ran on {devices[1]} and {names[0]} on {devices[0]}: a reproduction compares "
                         "studies of one device type (a CPU study with a CPU study, a GPU study with a GPU study)")
    data = measured.data_table(stored.facts, study.facts)
    differing = measured.in_short(list(data.index[data.differs]))
    a, b = (configurations(s.records).join(measured.protocol_of(s.records, summary.CONFIG), on=summary.CONFIG)
            .set_index(KEY) for s in (stored, study))
    shared = a.index.intersection(b.index).sort_values()
    kind = host_kind(stored.records, study.records)
    effect = hosts.effect_for(hosts.load() if host_effect is None else host_effect, kind)
    table = pd.DataFrame([_row(key, a.loc[key], b.loc[key], differing, allow_different_data, effect)
                          for key in shared], columns=None if len(shared) else KEY + ["verdict"])
    only = [frame.index.difference(shared).to_frame(index=False) for frame in (a, b)]
    return Comparison(table, only[0], only[1], _versions(stored.records, study.records), devices[0], data,
                      allow_different_data, kind, effect)


def load(directory: str | Path) -> Study:
    """A study directory's run records and data facts (a live one, results/<device>, or a stored one), with a
    clear refusal."""
    d = Path(directory)
    if not is_stored_study(d):
        raise SystemExit(f"{directory}: not a study directory (it needs config.yaml and runs/ with run records)")
    layout = Layout(str(d))
    paths = layout.stored_records()
    if not paths:
        raise SystemExit(f"{directory}: no run records under runs/")
    return Study(record.table(paths), read_facts(layout.facts))
