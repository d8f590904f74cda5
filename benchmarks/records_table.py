"""Print one line per run record under a results directory (a quick look on the device, before any summary).

    python benchmarks/records_table.py results/cuda/runs
"""

import json
import sys
from pathlib import Path

for path in sorted(Path(sys.argv[1]).rglob("r*.json")):
    rec = json.loads(path.read_text())
    c, m = rec["config"], rec.get("metrics") or {}
    prof = m.get("profile") or {}
    print(f"{c['shape_regime']:>18} {c['precision']:>4} {c['compile_mode']:>26} {c.get('compile_scope', 'module'):>11} "
          f"bs{c['batch_size']:<4} r{c['repeat']} {rec['status']:>13} step {m.get('steady_step_ms', float('nan')):8.3f} "
          f"x{m.get('in_process_speedup', float('nan')):6.3f} inf x{m.get('inference_speedup') or float('nan'):6.3f} "
          f"k/step {prof.get('kernels_per_step', float('nan')):7.1f} idle {prof.get('idle_fraction') or float('nan'):5.2f} "
          f"{(rec.get('error') or '')[:100]} {m.get('evidence_errors') or ''}")
