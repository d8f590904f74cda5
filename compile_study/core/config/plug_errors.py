"""A plugged model (model.factory or model.hf_config) that cannot work, found from the config without importing
it (core/models/plug_check.py tries it before the first run), and a sub-grid none of whose runs it can make."""

from __future__ import annotations

import importlib.util
import re

from compile_study.core import vocab
from compile_study.core.config import grid
from compile_study.core.config.config_problem import Problem


def model_errors(model: dict) -> list[Problem]:
    """A plug that cannot work, found without importing it (core/models/plug_check.py tries it before the first run)."""
    factory, hf = model.get("factory"), model.get("hf_config")
    if factory is not None and hf is not None:
        return [Problem("model.factory and model.hf_config: set one of them, not both",
                        ("model", "factory"), ("model", "hf_config"))]
    if factory is not None:
        return _factory_errors(factory)
    if hf is not None:
        return _hf_errors(hf, model["max_len"])
    return []


def _factory_errors(factory: str) -> list[Problem]:
    module, _, function = factory.partition(":")
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module) or not function.isidentifier():
        return [Problem(f"model.factory: {factory!r} is not an import path of the form package.module:function",
                        ("model", "factory"))]
    try:  # imports the parent packages, not the module itself
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return [Problem(f"model.factory: no module {module!r} can be imported (is it installed, or on PYTHONPATH?)",
                        ("model", "factory"))]
    return []


def _hf_errors(hf: dict, max_len: int) -> list[Problem]:
    out = []
    if not isinstance(hf.get("model_type"), str):
        out.append(Problem("model.hf_config.model_type: missing; name the transformers architecture, e.g. bert",
                           ("model", "hf_config")))
    for key, what in vocab.HF_SET_BY_STUDY.items():
        if key in hf:
            out.append(Problem(f"model.hf_config.{key}: set by the study ({what}); remove it", ("model", "hf_config")))
    positions = hf.get("max_position_embeddings")
    if isinstance(positions, int) and positions < max_len:
        out.append(Problem(f"model.hf_config.max_position_embeddings: {positions} is less than model.max_len "
                           f"({max_len}), the length static batches are padded to", ("model", "hf_config"),
                           ("model", "max_len")))
    if importlib.util.find_spec("transformers") is None:
        out.append(Problem("model.hf_config: needs transformers, an optional dependency that is not installed "
                           "(pinned in requirements.txt)", ("model", "hf_config")))
    return out


def plug_grid_errors(device: str, grids: list[dict], model: dict) -> list[Problem]:
    """A sub-grid none of whose runs a plugged model can make (vocab.plug_not_applicable): it would measure
    nothing. A sub-grid with some such runs is fine: they are recorded as not applicable, with the reason."""
    if model.get("factory") is None and model.get("hf_config") is None:
        return []
    key = "model.factory" if model.get("factory") is not None else "model.hf_config"
    out = []
    for i, g in enumerate(grids):
        runs = grid.expand([g])
        why = {vocab.plug_not_applicable(k.compile_scope, k.shape_regime) for k in runs}
        if runs and None not in why:
            out.append(Problem(f"grids.{device}[{i}] ({g['name']}): a plugged model ({key}) can make none of its "
                               f"runs: {'; '.join(sorted(why))}", ("grids", device, i), ("model",)))
    return out
