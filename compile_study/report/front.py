"""The paper's front: its abstract, the takeaway first, then what was timed, the headline cells (MIN_N processes or
more), shapes, what a cold start costs against an epoch and how many common claims held, as numbers and codes.
"""

from __future__ import annotations

from compile_study.core.intervals import LEVEL
from compile_study.report.advice import cold_epochs
from compile_study.report.document import Text
from compile_study.report.findings import (
    Context,
    batch_trend,
    claim_counts,
    data_facts,
    model,
    per_batch,
    shape_findings,
    stated,
    verdicts,
)


def _glossed(batches: list[dict], shape: dict | None, max_len: int) -> tuple[list[dict], dict | None]:
    """Copies of the abstract's rankings and shape finding whose configurations carry `gloss` at the first mention
    of a scope other than the module (defined in the method sentence) and `regime_gloss` at the first of a regime."""
    seen, regimes = {"module"}, {"static"}

    def mark(c: dict) -> dict:
        c = c | {"gloss": c["scope"] not in seen, "regime_gloss": c["regime"] not in regimes, "max_len": max_len}
        seen.add(c["scope"])
        regimes.add(c["regime"])
        return c

    shown = [batches[0], batches[-1]] if len(batches) > 1 else batches
    out = [b | {"top": [mark(c) for c in b["top"]] if len(b["top"]) <= 3 else b["top"]} for b in shown]
    return out, (shape | {"top": [mark(shape["top"][0])]}) if shape else None


def abstract(ctx: Context) -> list[Text]:
    """Takeaway first, then what was timed, the headline cells (MIN_N processes or more), shapes, cost, claims."""
    shapes = [f for f in shape_findings(ctx) if len(f["top"]) == 1 and f["below"] and f["claim"]
              and len({c["regime"] for c in f["top"] + f["below"]}) > 1]  # a regime above another, not a mode
    batches, shape = _glossed([b for b in per_batch(ctx) if stated(b)], shapes[-1] if shapes else None,
                              ctx.facts["max_len"])
    facts = {"device": ctx.device_name, "gpu": ctx.gpu, "precision": ctx.precision, "verdicts": verdicts(ctx),
             "trend": batch_trend(ctx), "model": model(ctx), "data": data_facts(ctx),
             "configs": len(ctx.summary), "runs": ctx.env.get("n_records"), "batches": batches,
             "shape": shape, "cold": cold_epochs(ctx), "claims": claim_counts(ctx), "level": LEVEL}
    return [Text("abstract", "takeaway", facts), Text("abstract", "body", facts)]
