"""The LaTeX paper (paper.tex.j2): same data as the Markdown paper, every data string escaped, every table row
with as many cells as its column spec. No TeX is installed where the tests run, so the checks are structural."""

import json
import re

import pandas as pd
import pytest

from compile_study import report
from compile_study.stages import paper_stage
from compile_study.summary import add_mfu, load_records, summarize

from .conftest import REPO
from .test_summary_report import record

TEX_TEMPLATE = REPO / "paper" / "templates" / "paper.tex.j2"
MD_TEMPLATE = REPO / "paper" / "templates" / "paper.md.j2"
HOSTILE = "GPU_|x| & 100% $5 #1 {a} \\b ^c ~d <script>"
HOSTILE_TEX = r"GPU\_|x| \& 100\% \$5 \#1 \{a\} \textbackslash{}b \textasciicircum{}c \textasciitilde{}d <script>"
TABLE_RULES = re.compile(r"\\(toprule|midrule|bottomrule|endhead|endfoot|endfirsthead|endlastfoot)\b")


def _edit(path, fn):
    rec = json.loads(path.read_text())
    fn(rec)
    path.write_text(json.dumps(rec))
    return path


def _profile(rec, top_name):
    top = [{"name": top_name, "calls_per_step": 3, "ms_per_step": 0.5, "share": 0.5},
           {"name": "triton_poi_fused_gelu_native_dropout_view_13", "calls_per_step": 2, "ms_per_step": 0.25, "share": 0.25}]
    prof = {"kernels_per_step": 120, "idle_fraction": 0.4, "cpu_ms_per_step": 5.0, "device_busy_ms_per_step": 4.0,
            "wall_ms_per_step": 9.0, "triton_kernels_distinct": 7, "distinct_kernels": 20, "top_kernels": top}
    if rec["status"] == "ok":
        rec["metrics"] |= {"profile": prof, "reference_profile": prof | {"kernels_per_step": 150}}


@pytest.fixture
def study(tmp_path):
    """Every section of the paper filled, hostile strings in every place a data string can reach."""
    paths = [record(tmp_path, "eager", 32, r, ms, ref) for r, (ms, ref) in enumerate([(10.0, 10.1), (10.2, 10.0), (9.8, 9.9)])]
    paths += [record(tmp_path, "default", 32, r, ms, 10.0) for r, ms in enumerate([8.0, 8.1, 7.9])]
    paths += [record(tmp_path, "reduce-overhead", 32, r, ms, 10.0) for r, ms in enumerate([9.95, 10.0, 10.05])]
    paths += [record(tmp_path, m, 32, 0, ms, 10.0, regime="dynamic") for m, ms in (("eager", 9.0), ("default", 7.0))]
    paths += [record(tmp_path, "eager", 4096, 0, 99.0, 99.0)]
    paths += [record(tmp_path, "default", 4096, 0, None, status="oom", error=f"OutOfMemoryError: {HOSTILE}\n# injected")]
    (tmp_path / "scope").mkdir()
    paths.append(_edit(record(tmp_path / "scope", "default", 32, 0, 9.0, 10.0),
                       lambda rec: rec["config"].update(compile_scope="forward")))
    for p in paths:
        _edit(p, lambda rec: (rec["env"].update(device_name=HOSTILE), _profile(rec, f"void at::native::{HOSTILE}_kernel")))
    _edit(paths[3], lambda rec: rec["metrics"].update(evidence_errors={"phases": HOSTILE}))
    summary = add_mfu(summarize(load_records(paths)), {"bf16": {"tflops": 800.0}})
    facts = {"description": HOSTILE, "source": "csv", "notes": [HOSTILE], "vocab_size": 100, "max_len": 128,
             "splits": {s: {"rows": 10, "pad_fraction_at_max_len": 0.58,
                            "token_length_percentiles": {"p50": 1, "p90": 2, "p99": 3, "max": 4}} for s in ("train", "eval")}}
    env = {"device_name": HOSTILE, "torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0", "driver": HOSTILE,
           "python": "3.12", "cpu_model": HOSTILE, "cpu_cores": "16", "git_commit": HOSTILE, "git_dirty": "True",
           "n_records": len(paths), "statuses": {"ok": len(paths) - 1, HOSTILE: 1}, "peak_tflops": {"bf16": 800.0}}
    grids = [{"name": HOSTILE, "compile_mode": ["eager", "default"], "batch_size": [32, 128], "shape_regime": ["static"],
              "precision": ["bf16"], "repeats": 3, "warmup_steps": 5, "timed_steps": 100, "interleave_chunk": 10,
              "recompile_limit": 8, "max_epoch_steps": None}]
    config = {"model": {"n_layers": 4, "n_heads": 4, "d_model": 256, "d_ff": 1024, "dropout": 0.1, "max_len": 128},
              "train": {"lr": 3e-4}, "grids": {"cuda": grids}}
    parity = pd.DataFrame([{"compile_mode": "default", "precision": "bf16", "batch_size": 32, "loss_steps": 20,
                            "train_steps": 106, "max_rel_loss_diff": 0.004, "loss_rtol": 0.05, "loss_ok": True,
                            "eager_accuracy": 0.81, "compiled_accuracy": 0.795, "accuracy_delta_points": -1.5,
                            "accuracy_ok": False}])
    claims = pd.DataFrame([{"claim": f"Training is 20–40% faster {HOSTILE}", "verdict": HOSTILE,
                            "evidence": f"default: 1.15–1.40× {HOSTILE}"}])
    return dict(summary=summary, parity=parity, env=env, facts=facts, config=config, grids=grids, claims=claims)


def render(study, template=TEX_TEMPLATE, latex=True):
    context = dict(config=study["config"], grids=study["grids"], device="cuda", figures="figures")
    return report.render(template, study["summary"], study["parity"], study["env"], study["facts"], context,
                         study["claims"], latex=latex)


def tokens(text):
    """TeX tokens, roughly: a control sequence (\\name or \\<symbol>) or one character."""
    return re.findall(r"\\(?:[A-Za-z]+|.)|.", text, re.S)


def body(text):
    start, end = text.index(r"\begin{document}"), text.index(r"\end{document}")
    # \code{...} is url-style verbatim holding only template text (paths, identifiers with _)
    return re.sub(r"\\code\{[^{}]*\}", "", text[start + len(r"\begin{document}"):end])


def group(text, start):
    """The text of the brace group opening at text[start] == '{'."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1:i]
    raise AssertionError(f"unbalanced group at {start}")


def n_columns(spec):
    spec = re.sub(r"[@<>!]\{[^{}]*\}", "", spec)  # inter-column material and >{...} decorations
    spec = re.sub(r"[pmbLR]\{[^{}]*\}", "X", spec)  # p{width} and the template's L{width}, R{width}
    assert "*" not in spec and "{" not in spec, spec
    return sum(c in "lcrX" for c in spec)


def tables(text):
    """(column count, [rows]) for every longtable/tabular in the body; a row's cells are split on its top-level &."""
    out = []
    for m in re.finditer(r"\\begin\{(longtable|tabular)\}(\[[a-z]\])?", text):
        spec = group(text, m.end())
        rest = text[m.end() + len(spec) + 2:]
        content = rest[:rest.index(r"\end{" + m.group(1) + "}")]
        rows, row, depth = [], [], 0
        for t in tokens(content):
            depth += {"{": 1, "}": -1}.get(t, 0)
            if t == "\\\\" and depth == 0:
                rows.append("".join(row))
                row = []
            else:
                row.append(t)
        assert not TABLE_RULES.sub("", "".join(row)).strip(), f"text after the last row: {''.join(row)!r}"
        out.append((n_columns(spec), [TABLE_RULES.sub("", r).strip() for r in rows]))
    return out


def test_latex_paper_holds_the_measured_numbers(study):
    tex = render(study)
    assert (r"bf16 & 32 & default & 3/3 & 8.00 & 10.00 & 1.25× & [1.23, 1.27] & faster & 1.25× & 12.5 & 4.5 & 6,250 & "
            r"2.00 & 12.5\% &") in tex
    assert r"bf16 & 32 & reduce-overhead & 3/3 & 10.00 & 10.00 & 1.00× &" in tex and "no measurable difference" in tex
    assert "OOM at batch 4096" in tex
    assert r"default & bf16 & 32 & 20 & 4.0e-03 & 5e-02 & pass & 106 & 81.0\% & 79.5\% & -1.5 & FAIL \\" in tex
    assert r"\textbf{1.43$\times$}" in tex  # the best speedup: default, dynamic shapes, 10 / 7 ms
    assert r"bf16 & 32 & default & 120 & 150 & 40\% & 40\% & 5.00 & 4.00 & 7 &" in tex  # profiler evidence
    assert r"default, module, static, bf16, batch 128: 0 of 3 repeats" in tex  # the Not run list
    for name in ("speedup", "kernels", "regimes", "buckets", "timeline"):
        assert rf"{{figures/{name}.pdf}}" in tex


def test_latex_paper_has_the_sections_of_the_markdown_paper(study):
    md_sections = re.findall(r"^## (.+)$", render(study, MD_TEMPLATE, latex=False), re.M)
    tex_sections = re.findall(r"\\section\{(.+)\}$", render(study), re.M)
    assert tex_sections == md_sections and len(tex_sections) >= 12


def test_data_strings_are_escaped(study):
    tex = render(study)
    assert HOSTILE_TEX in tex
    assert r"\textbackslash{}b" in tex and "<script>" in tex  # T1 prints < and > as themselves
    assert HOSTILE not in tex and "\n# injected" not in tex
    toks = tokens(body(tex))
    for ch in "%#_^~":
        assert ch not in toks, f"unescaped {ch}"
    assert toks.count("$") % 2 == 0  # only the template's own $...$ math


def test_table_rows_match_their_column_spec_and_no_stray_alignment(study):
    text = body(render(study))
    found = tables(text)
    assert len(found) >= 9
    for ncols, rows in found:
        assert rows
        for row in rows:
            if row:
                assert tokens(row).count("&") == ncols - 1, (ncols, row)
    outside = re.sub(r"\\begin\{(longtable|tabular)\}.*?\\end\{\1\}", "", text, flags=re.S)
    assert "&" not in tokens(outside)


def test_document_is_complete_and_balanced(study):
    tex = render(study)
    assert tex.lstrip().startswith(r"\documentclass") and tex.rstrip().endswith(r"\end{document}")
    assert tex.count(r"\begin{document}") == 1 and tex.count(r"\end{document}") == 1
    depth = 0
    for t in tokens(tex):
        depth += {"{": 1, "}": -1}.get(t, 0)
        assert depth >= 0
    assert depth == 0
    envs = []
    for kind, name in re.findall(r"\\(begin|end)\{(\w+)\}", tex):
        if kind == "begin":
            envs.append(name)
        else:
            assert envs.pop() == name
    assert not envs
    assert not re.search(r"\(\(\(|\)\)\)|\(\(\*|\*\)\)|\(\(=|=\)\)", tex)  # no Jinja delimiter left over


def test_paper_stage_writes_both_papers_with_figure_paths_relative_to_each(study, tmp_path):
    d = tmp_path / "study"
    d.mkdir()
    study["summary"].to_csv(d / "summary.csv", index=False)
    study["parity"].to_csv(d / "parity.csv", index=False)
    study["claims"].to_csv(d / "claims.csv", index=False)
    (d / "environment.json").write_text(json.dumps(study["env"]))
    (d / "facts.json").write_text(json.dumps(study["facts"]))
    paper_stage(MD_TEMPLATE, d / "summary.csv", d / "parity.csv", d / "environment.json", d / "facts.json",
                d / "figures", d / "paper.md", study["config"], "cuda", d / "claims.csv",
                tex_template=TEX_TEMPLATE, tex_out=d / "tex" / "paper.tex")
    assert "](figures/speedup.png)" in (d / "paper.md").read_text()
    tex = (d / "tex" / "paper.tex").read_text()
    assert "{../figures/speedup.pdf}" in tex and HOSTILE_TEX in tex
    with pytest.raises(ValueError):
        paper_stage(MD_TEMPLATE, d / "summary.csv", d / "parity.csv", d / "environment.json", d / "facts.json",
                    d / "figures", d / "paper.md", study["config"], "cuda", tex_template=TEX_TEMPLATE)


def test_method_checks_reach_both_papers_when_their_json_is_there(study, tmp_path):
    d = tmp_path / "study"
    d.mkdir()
    for name in ("summary", "parity", "claims"):
        study[name].to_csv(d / f"{name}.csv", index=False)
    (d / "environment.json").write_text(json.dumps(study["env"]))
    (d / "facts.json").write_text(json.dumps(study["facts"]))
    timer = {"compile_mode": "default", "batch_size": 64, "precision": "bf16", "rounds": 3, "harness_median_ms": 9.028,
             "harness_block_mean_ms": 8.628, "timer_median_ms": 9.159, "do_bench_median_ms": 9.439,
             "harness_vs_timer": 0.9857, "within_3pct": True}
    drift = {"compile_mode": "default", "batch_size": 16, "before_ms": 11.306, "after_compile_ms": 10.859,
             "interleaved_ms": 10.701, "workers_shut_ms": 10.388, "gc_frozen_ms": 11.554,
             "interleaved_compiled_ms": 8.47, "in_process_speedup": 1.2634, "speedup_vs_before": 1.3348}
    args = (MD_TEMPLATE, d / "summary.csv", d / "parity.csv", d / "environment.json", d / "facts.json", d / "figures",
            d / "paper.md", study["config"], "cuda", d / "claims.csv")
    paper_stage(*args, tex_template=TEX_TEMPLATE, tex_out=d / "paper.tex", checks_dir=d)
    assert "Checks of the method" not in (d / "paper.md").read_text()  # nothing to show: no section
    (d / "timer_check.json").write_text(json.dumps({"results": [timer]}))
    (d / "reference_drift.json").write_text(json.dumps({"results": [drift]}))
    paper_stage(*args, tex_template=TEX_TEMPLATE, tex_out=d / "paper.tex", checks_dir=d)
    md, tex = (d / "paper.md").read_text(), (d / "paper.tex").read_text()
    assert "| default | 64 | bf16 | 9.028 | 8.628 | 9.159 | 9.439 | 0.986 | yes |" in md
    assert "| default | 16 | 11.306 | 10.859 | 10.701 | 10.388 | 11.554 | 8.470 | 1.26× | 1.33× |" in md
    assert "default & 64 & bf16 & 9.028 & 8.628 & 9.159 & 9.439 & 0.986 & yes" in tex and "\\section{Checks of the method}" in tex
