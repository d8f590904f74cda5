"""The study's words, written once: compile modes, compile scopes, precisions, shape regimes, statuses.

Torch-free, so that the config schema check, the Snakemake wildcard constraints, the grid expansion and
every table, figure and claim can import it cheaply. `tests/test_vocab.py` checks the schema's enums and
the rules' wildcard constraints against it.

    python -c "from compile_study.core import vocab; print(vocab.wildcard_constraints())"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# --- compile modes: torch.compile(mode=...); eager is the reference path (nothing compiled) -----------------
# One list per word: the schema's enums (workflow/schemas/config.schema.yaml, checked by tests/test_vocab.py), the
# grid, the scopes' rules below and the paper's terms (paper/templates/sections/terms.j2) all read these.
COMPILE_MODES = ("eager", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
COMPILED_MODES = COMPILE_MODES[1:]  # every mode but eager
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")  # Inductor records CUDA graphs (on CUDA only)
AUTOTUNE_MODES = ("max-autotune", "max-autotune-no-cudagraphs")  # search kernel configs: minutes per shape
# How a run found its Inductor cache (its record's env `inductor_cache`): repeat 0 empty ("cold"), later repeats
# filled by repeat 0 ("warm"), or, where a sub-grid shares one GEMM search between its max-autotune modes
# (`gemm_search: shared`), repeat 0 of a later mode empty but for the first mode's search results (SEARCH_SHARED):
# its graphs and kernels compile cold, its GEMMs' kernel choices are looked up, not benchmarked.
CACHE_STATES = ("cold", "warm", "cold, GEMM search shared")
SEARCH_SHARED = CACHE_STATES[2]
# How a fresh process of the compile phase reaches the compiled step (a compile record's `start`): `cold` from an
# empty cache; `portable` from an empty cache fed the portable artifacts (torch.compiler.save_cache_artifacts, the
# "Mega-Cache") that the configuration's first cold compile saved, as a training job shipped with them starts.
COLD_STARTS = ("cold", "portable")

# --- compile scopes: what is compiled (compile_study/measure/compile.py implements each; the paper's words for
# each scope and shape regime are in paper/templates/sections/terms.j2) ------------------------------------------
COMPILE_SCOPES = ("module", "fused-adamw", "regional", "forward", "backward", "aot-eager", "step", "step-graph",
                  "eager-step-graph", "graph-break")
# Which modes a scope runs with, made from the mode lists above, so that a new mode needs no edit here.
SCOPE_MODES = {
    "module": COMPILE_MODES,
    "fused-adamw": COMPILE_MODES,
    "regional": COMPILED_MODES,  # each repeated block compiled with the mode's options; eager is `module`'s run
    "forward": ("default",),  # a custom Inductor backend: mode does not apply
    "backward": ("default",),
    "aot-eager": ("default",),  # backend aot_eager: no Inductor, mode does not apply
    "step": COMPILED_MODES,
    # the capture is the CUDA graph: no Inductor CUDA graphs inside it
    "step-graph": tuple(m for m in COMPILED_MODES if m not in CUDAGRAPH_MODES),
    # step-graph's control: the same whole step captured with the eager model, nothing compiled, so that the step
    # graph's gain splits into the CUDA graph's and the compiler's (aggregate/decide.py graph_split)
    "eager-step-graph": ("eager",),
    "graph-break": COMPILED_MODES,
}
# the scopes eager runs at (it runs every scope whose modes include it): module is the reference of every scope
EAGER_SCOPES = tuple(s for s in COMPILE_SCOPES if "eager" in SCOPE_MODES[s])
CUDA_ONLY_SCOPES = ("step-graph", "eager-step-graph")  # refused in grids.cpu (core/config/grid_errors.py)
# the whole step captured as one CUDA graph (measure/step_graph.py): the compiled model's, and eager's control
GRAPH_SCOPES = ("step-graph", "eager-step-graph")
# the scopes one would train with; forward, backward and aot-eager are diagnostic baselines, graph-break a probe
TRAINING_SCOPES = ("module", "fused-adamw", "regional", "step", "step-graph", "eager-step-graph")
# What only the built-in model can run, and why: a plugged model (config model.factory / model.hf_config) takes
# ids and an attention mask and nothing else; its runs of these are recorded as not applicable, with the reason.
BUILTIN_ONLY_SCOPES = {
    "graph-break": "graph-break swaps the built-in model's pooling for one through torch.nonzero; a plugged model "
                   "has no such switch",
}
BUILTIN_ONLY_REGIMES = {
    "packed": "packed rows need the built-in model's packed path (positions restarting per sequence, a document "
              "mask, pooling per sequence); a plugged model takes ids and an attention mask only",
}
# packed batches go through the model's packed path: the scopes that call the model as a module (regional: the
# packed path goes through the same compiled layers, a block mask or a dense mask as their input)
PACKED_SCOPES = ("module", "fused-adamw", "regional", "step-graph")
# What a scope cannot measure on a regime, whatever the model, and why (recorded as not applicable)
SCOPE_REGIME_NOT_APPLICABLE = {
    ("regional", "dynamic-marked"): "dynamic-marked marks the length of the model's input ids; the blocks that "
                                    "regional compiles take the embeddings' output, which carries no mark, so the "
                                    "run would be regional on dynamic batches under another name",
}

# --- precisions ---------------------------------------------------------------------------------------------
PRECISIONS = ("fp32", "tf32", "bf16")  # fp32 with TF32 off; TF32 matmuls; bf16 autocast

# --- outcomes of a run --------------------------------------------------------------------------------------
STATUSES = ("ok", "oom", "compile_error", "nan", "error", "not_applicable")
FAILURE_LABELS = {"oom": "OOM", "compile_error": "compile error", "nan": "non-finite loss", "error": "error",
                  "not_applicable": "not applicable"}
USABLE_STATUSES = ("ok", "partial")  # a configuration some of whose repeats failed still has numbers

# --- shape regimes ------------------------------------------------------------------------------------------
REGIME_KINDS = ("static", "dynamic", "dynamic-true", "dynamic-false", "dynamic-marked", "bucketed", "packed")
# a regime's name in record paths: its kind, a bucketed one with its edges (bucketed-32-64-128); longest first, so
# that dynamic-true is not read as dynamic
_REGIME_RE = "|".join(r"bucketed(-\d+)+" if k == "bucketed" else k
                      for k in sorted(REGIME_KINDS, key=len, reverse=True))


@dataclass(frozen=True)
class Regime:
    """A parsed `shape_regime` (as in record paths): `Regime.parse("bucketed-32-64-128").edges == (32, 64, 128)`."""

    name: str
    kind: str  # one of REGIME_KINDS
    edges: tuple[int, ...] = ()  # bucket edges (bucketed only)

    @classmethod
    def parse(cls, name: str) -> Regime:
        if not re.fullmatch(_REGIME_RE, name):
            raise ValueError(f"shape_regime {name!r} is not one of {', '.join(REGIME_KINDS[:5])}, packed or "
                             "bucketed-<edge>-<edge>...")
        if name.startswith("bucketed-"):
            return cls(name, "bucketed", tuple(int(e) for e in name.split("-")[1:]))
        return cls(name, name)

    @property
    def is_dynamic(self) -> bool:
        """Batches padded to their own longest row (all dynamic-* variants)."""
        return self.kind.startswith("dynamic")

    @property
    def reference(self) -> str:
        """The eager regime this one is compared with: eager does not care how `dynamic` is set."""
        return "dynamic" if self.is_dynamic else self.name

    @property
    def compiled_only(self) -> bool:
        """dynamic-true/false/marked differ from `dynamic` only in how they are compiled: no eager run of their own."""
        return self.is_dynamic and self.kind != "dynamic"

    def compile_kwargs(self) -> dict:
        """torch.compile's `dynamic=` for this regime (bucketed and packed keep static, specialised graphs)."""
        fixed = {"dynamic-true": True, "dynamic-false": False, "bucketed": False, "packed": False}
        return {"dynamic": fixed.get(self.kind)}  # static, dynamic, dynamic-marked: None (torch's default)

    @property
    def marks_dynamic(self) -> bool:
        return self.kind == "dynamic-marked"

    def check(self, max_len: int) -> None:
        """Bucket edges must increase strictly, be >= 1 and end at max_len (every sequence fits a bucket)."""
        e = list(self.edges)
        if self.kind == "bucketed" and (e != sorted(set(e)) or e[0] < 1 or e[-1] != max_len):
            raise ValueError(f"bucket edges {e} must be strictly increasing, >= 1, and end at max_len={max_len}")


def expand_regimes(names: list[str], bucket_sets: list[list[int]]) -> list[str]:
    """A grid's `shape_regime` list with `bucketed` expanded to one regime per bucket set (bucketed-32-64-128)."""
    out = []
    for name in names:
        out += ["bucketed-" + "-".join(map(str, edges)) for edges in bucket_sets] if name == "bucketed" else [name]
    return out


def times_inference(scope: str, regime: str) -> bool:
    """Whether a configuration's evidence times inference (measure/protocol.py inference_block): the module
    compiled whole, static lengths. Its first cold compile compiles that graph as well (measure/cold.py), so that
    no compile runs in its timed run."""
    return scope == "module" and regime == "static"


def runs_with(mode: str, scope: str, regime: str) -> bool:
    """Whether a (mode, scope, regime) combination is a run of the study.

    Eager runs the scopes that change what runs eagerly (EAGER_SCOPES: module, fused-adamw, eager-step-graph) and
    the regimes that change the batches (not dynamic-true/false/marked: the `dynamic` eager run is their
    reference); every other scope runs with the modes SCOPE_MODES allows; packed batches run with PACKED_SCOPES only.
    """
    r = Regime.parse(regime)
    if r.kind == "packed" and scope not in PACKED_SCOPES:
        return False
    if mode == "eager":
        return scope in EAGER_SCOPES and not r.compiled_only
    return mode in SCOPE_MODES[scope]


# Keys of a transformers config (model.hf_config) that the study sets itself, from the data and the tokenizer
HF_SET_BY_STUDY = {"vocab_size": "the tokenizer's vocabulary, data.vocab_size", "num_labels": "the data's classes",
                   "pad_token_id": "the tokenizer's padding id, 0"}


# a transformers config's names for its depth and width, by model family (first found wins)
HF_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HF_WIDTH = ("hidden_size", "d_model", "n_embd", "dim")


def hf_size(hf_config: dict | None) -> dict:
    """A transformers config's layers and width as it names them ({} where it names neither)."""
    found = {"layers": next((hf_config[k] for k in HF_LAYERS if k in hf_config), None),
             "width": next((hf_config[k] for k in HF_WIDTH if k in hf_config), None)} if hf_config else {}
    return {k: v for k, v in found.items() if v is not None}


def plug_not_applicable(scope: str, regime: str) -> str | None:
    """Why a plugged model cannot run this scope and regime (None: it can)."""
    return BUILTIN_ONLY_SCOPES.get(scope) or BUILTIN_ONLY_REGIMES.get(Regime.parse(regime).kind)


def scope_not_applicable(scope: str, regime: str) -> str | None:
    """Why no model can measure this scope on this regime (None: it can)."""
    return SCOPE_REGIME_NOT_APPLICABLE.get((scope, Regime.parse(regime).kind))


def wildcard_constraints() -> dict[str, str]:
    """Snakemake wildcard constraints of a run record's path, made from the lists above."""
    alt = "|".join
    return {
        "compile_mode": alt(sorted(COMPILE_MODES, key=len, reverse=True)),
        "compile_scope": alt(sorted(COMPILE_SCOPES, key=len, reverse=True)),
        "precision": alt(PRECISIONS),
        "shape_regime": _REGIME_RE,
        "batch_size": r"\d+",
        "repeat": r"\d+",
    }


# --- selections used by every table, figure and claim ----------------------------------------------------------
def usable(df):
    """Configurations (or runs) with numbers: ok, or partly failed with some repeats ok."""
    return df[df.status.isin(USABLE_STATUSES)]


def headline(df):
    """The headline comparison: static shapes, the module compiled (what `torch.compile(model)` gives)."""
    return df[(df.shape_regime == "static") & (df.compile_scope == "module")]


def failure_label(status: str) -> str:
    return FAILURE_LABELS.get(status, status)
