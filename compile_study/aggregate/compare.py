"""Did a study reproduce a stored one? Configuration by configuration, by a stated rule (torch-free).

    from compile_study.aggregate.compare import compare, load
    result = compare(load("reference/<name>"), load("results/cuda"), names=("reference/<name>", "results/cuda"))

(report/reproduction.py writes the report and is the command line: `python -m compile_study compare`.)

Both sides are read from their run records (core/record.py) and data facts (facts.json); a configuration is the
summary's (shape regime, precision, batch size, compile mode, scope). Before any verdict, what the two measured is
established (aggregate/measured.py): a difference in the data (source, input sha256, vocabulary, rows available or
used) makes every configuration "not comparable", a difference in a configuration's protocol (timed steps, block,
warm-up, epoch cap, recompile limit, fp32 matmul precision, TF32) that configuration; `allow_different_data`
gives the verdicts on different data anyway, each marked so. Per configuration present on both sides and
comparable, from each side's per-process speedups (in_process_speedup, the unit the study's intervals are made of):

  ratio    = exp(mean log speedup of the study - mean log speedup of the stored study)
  interval = the 95% Welch t interval of that difference of means (scipy.stats.ttest_ind, unequal variances)
  margin   = the larger of the two cells' A/A bands (core/stats.aa_band: how far one eager-vs-eager process
             strays by chance on that host), and at least MIN_MARGIN; a cell without eager runs leaves the
             other side's band

Verdict, in this order:
  inconclusive (n < 3)              either side has fewer than 3 successful processes
  inconclusive (no A/A control)     neither side has an A/A band for the cell
  differs (faster / slower)         the interval excludes 1 and the ratio lies beyond the margin (the study's
                                    speedup is larger / smaller than the stored one's)
  reproduced                        the interval lies within [1/T, T], T = max(1.3, margin): a shift of 1.3x
                                    (the shift the rule must detect) or more is ruled out
  inconclusive (interval too wide)  otherwise
tests/test_compare.py simulates pairs of studies: on pairs drawn from one distribution the rule says "differs"
in at most 5% of them, and it calls a real 1.3x shift "differs" in at least 80% at n = 3 per side.

Absolute step times depend on the host (its CPU above all where the step is launch-bound); the report gives
their ratio beside both hosts' GPU and CPU models, and judges speedups only.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from compile_study.aggregate import measured, summary
from compile_study.core import record, stats
from compile_study.core.data import read_facts
from compile_study.core.layout import Layout, is_stored_study

LEVEL = 0.95  # of the Welch interval on the difference of mean log speedups
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


@dataclass(frozen=True)
class Judgement:
    """One configuration: the study's speedup over the stored one's, its interval, the margin and the verdict."""

    ratio: float  # geometric mean speedup of the study / that of the stored study
    low: float  # 95% Welch interval of the ratio (NaN under MIN_N processes on either side)
    high: float
    margin: float  # the larger A/A band of the two cells (>= 1; NaN without any)
    verdict: str  # reproduced, differs (faster), differs (slower), inconclusive
    reason: str | None = None  # why inconclusive: n < 3, no A/A control, interval too wide


def welch_interval(stored_logs, study_logs, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The Welch t interval of mean(study_logs) - mean(stored_logs) over the last axis (one pair, or many pairs
    at once as [pairs, processes]); where neither side varies, the difference itself."""
    a, b = np.asarray(stored_logs, float), np.asarray(study_logs, float)
    diff = b.mean(axis=-1) - a.mean(axis=-1)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # a constant side: NaN here, replaced below
        ci = sps.ttest_ind(b, a, axis=-1, equal_var=False).confidence_interval(level)
    constant = (a.var(axis=-1) == 0) & (b.var(axis=-1) == 0)
    return np.where(constant, diff, ci.low), np.where(constant, diff, ci.high)


def margin_of(*bands: tuple[float, float]) -> float:
    """The larger of the A/A bands [low, high] given (as a ratio >= 1), at least MIN_MARGIN; NaN where none is
    finite."""
    halves = [max(high, 1 / low) for low, high in bands if np.isfinite(low) and np.isfinite(high) and low > 0]
    return max(*halves, MIN_MARGIN) if halves else float("nan")


def decide(n: int, ratio: float, low: float, high: float, margin: float) -> tuple[str, str | None]:
    """(verdict, reason) from the fewer processes of the two sides, the ratio, its interval and the margin."""
    if n < MIN_N:
        return "inconclusive", f"n < {MIN_N}"
    if not np.isfinite(margin):
        return "inconclusive", "no A/A control"
    if (low > 1 or high < 1) and not 1 / margin <= ratio <= margin:
        return ("differs (faster)" if ratio > 1 else "differs (slower)"), None
    tolerance = max(TOLERANCE, margin)
    if 1 / tolerance <= low and high <= tolerance:
        return "reproduced", None
    return "inconclusive", "interval too wide"


def _logs(speedups) -> np.ndarray:
    v = np.array([np.nan if x is None else x for x in speedups], float)
    return np.log(v[np.isfinite(v) & (v > 0)])


def judge(stored_speedups, study_speedups, margin: float) -> Judgement:
    """The verdict on one configuration from each side's per-process speedups (the rule in the module docstring)."""
    a, b = _logs(stored_speedups), _logs(study_speedups)
    n = min(len(a), len(b))
    ratio = float(np.exp(b.mean() - a.mean())) if n else float("nan")
    low, high = (float(np.exp(x)) for x in welch_interval(a, b)) if n >= MIN_N else (np.nan, np.nan)
    return Judgement(ratio, low, high, margin, *decide(n, ratio, low, high, margin))


def _distinct(values) -> str:
    found = sorted({str(v) for v in values if v is not None and v == v})
    return ", ".join(found) if found else "—"


def configurations(records: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: speedup interval, method, n and A/A band (core/stats), median step time, the host, and
    the successful processes' speedups (what the verdict is computed from)."""
    table = stats.speedup_table(records, summary.CONFIG, summary.CELL)
    ok = records[records.status == "ok"].groupby(summary.CONFIG)
    extra = pd.DataFrame({"step_ms": ok.steady_step_ms.median(),
                          "speedups": ok.in_process_speedup.agg(list),
                          **{k: ok[k].agg(_distinct) for k in HOST_KEYS}}).reset_index()
    return table.merge(extra, on=summary.CONFIG, how="left")


SIDE_COLUMNS = {"speedup": "speedup", "speedup_low": "low", "speedup_high": "high", "speedup_method": "method",
                "speedup_n": "n", "aa_band_low": "aa_low", "aa_band_high": "aa_high", "step_ms": "step_ms",
                "device_name": "device", "cpu_model": "cpu"}


def _not_comparable(data: list[str], protocol: list[str], allow_different_data: bool) -> str | None:
    """Why a configuration gets no verdict: the data (unless allowed) and its protocol settings that differ."""
    parts = [f"data ({', '.join(data)})"] if data and not allow_different_data else []
    parts += [f"protocol ({'; '.join(protocol)})"] if protocol else []
    return "; ".join(parts) or None


def _row(key: tuple, a: pd.Series, b: pd.Series, data: list[str], allow_different_data: bool) -> dict:
    j = judge(a.speedups if isinstance(a.speedups, list) else [], b.speedups if isinstance(b.speedups, list) else [],
              margin_of((a.aa_band_low, a.aa_band_high), (b.aa_band_low, b.aa_band_high)))
    row = dict(zip(KEY, key))
    for side, s in (("stored", a), ("study", b)):
        row |= {f"{side}_{new}": s[old] for old, new in SIDE_COLUMNS.items()}
    protocol = measured.protocol_differences(a, b)
    why = _not_comparable(data, measured.protocol_words(a, b, protocol), allow_different_data)
    verdict, reason = ("not comparable", why) if why else (j.verdict, j.reason)
    return row | {"ratio": j.ratio, "ratio_low": j.low, "ratio_high": j.high, "margin": j.margin,
                  "verdict": verdict, "reason": reason, "different_data_allowed": bool(data) and not why,
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
    data: pd.DataFrame  # what each side trained on (aggregate/measured.py data_table): stored, study, differs
    allow_different_data: bool = False  # verdicts given where the data differ, each marked so

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
    want of an A/A control, and not comparable)."""
    v = table.verdict.astype(str) if len(table) else pd.Series(dtype=str)
    reason = table.reason.astype(str) if len(table) and "reason" in table else pd.Series("", index=v.index)
    reproduced, differs, inconclusive = v == "reproduced", v.str.startswith("differs"), v == "inconclusive"
    too_wide = inconclusive & (reason == "interval too wide")
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
    return table


def compare(stored: Study, study: Study, names: tuple[str, str] = ("stored", "study"),
            allow_different_data: bool = False) -> Comparison:
    """Two studies of the same device type -> what each measured, then the comparison, configuration by
    configuration (a configuration whose data or protocol differ is "not comparable")."""
    devices = device_of(stored.records, names[0]), device_of(study.records, names[1])
    if devices[0] != devices[1]:
        raise SystemExit(f"{names[1]} ran on {devices[1]} and {names[0]} on {devices[0]}: a reproduction compares "
                         "studies of one device type (a CPU study with a CPU study, a GPU study with a GPU study)")
    data = measured.data_table(stored.facts, study.facts)
    differing = measured.in_short(list(data.index[data.differs]))
    a, b = (configurations(s.records).join(measured.protocol_of(s.records, summary.CONFIG), on=summary.CONFIG)
            .set_index(KEY) for s in (stored, study))
    shared = a.index.intersection(b.index).sort_values()
    table = pd.DataFrame([_row(key, a.loc[key], b.loc[key], differing, allow_different_data) for key in shared],
                         columns=None if len(shared) else KEY + ["verdict"])
    only = [frame.index.difference(shared).to_frame(index=False) for frame in (a, b)]
    return Comparison(table, only[0], only[1], _versions(stored.records, study.records), devices[0], data,
                      allow_different_data)


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
