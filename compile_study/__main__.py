"""The study's command line: one entry per tool, each a module's own `main`.

    python -m compile_study estimate config.yaml --device cuda      # wall time of a study
    python -m compile_study walltime results/cuda                   # where its calls' time went
    python -m compile_study grid --device cuda --sub-grid modes config.yaml
    python -m compile_study record results/cpu/runs/static/fp32/default/module/bs8/r0.json
    python -m compile_study session results/cuda -- snakemake --cores all
    python -m compile_study rebuild reference/<name>
    python -m compile_study readme README.md reference/<name>
    python -m compile_study compare reference/<name> results/cuda    # did results/cuda reproduce reference/<name>?
    python -m compile_study host-effect                             # how much hosts differ (reference/host-effect.json)
    python -m compile_study spread reference/<a> reference/<b> --configuration static bf16 512 default module
    python -m compile_study model config.yaml configs/hf-bert.yaml   # check the configured model, print its facts
    python -m compile_study compare-models reference/<plugged> reference/<built-in>

A bad input ends any command in its message, exit status 2, without a traceback: a command's refusal
(SystemExit), a bad input it raised (core/errors.py InputError: a damaged record, data that cannot be used), a
file that cannot be read or written (OSError, with its path) or a child process that failed after its message.
"""

from __future__ import annotations

import importlib
import shlex
import subprocess
import sys

from compile_study.core.errors import InputError

COMMANDS = {  # command -> (module, what it does)
    "estimate": ("aggregate.estimate.estimate", "a study's wall time, every job of its plan, from earlier records"),
    "walltime": ("aggregate.estimate.calls", "where every second of a study's logged calls went"),
    "grid": ("core.config.grid", "the run records of a device's grid (Snakemake targets)"),
    "record": ("core.record", "one line per run record"),
    "session": ("core.calls.session", "run a study's command and log the call in calls.jsonl"),
    "rebuild": ("report.docs.rebuild", "remake a stored study's summary, figures and paper"),
    "readme": ("report.docs.project_docs", "regenerate the generated blocks of the project's README and docs/"),
    "compare": ("report.compare.reproduction", "a study against a stored one: did it reproduce? (reproduction.md)"),
    "host-effect": ("report.compare.host_effect", "how much hosts of one kind differ, from the stored studies (host-effect.json)"),
    "spread": ("aggregate.spread", "why a configuration's speedup spreads: its processes side by side, study by study"),
    "model": ("core.models.plug_check", "check the configured model (built-in or plugged) and print its facts"),
    "compare-models": ("aggregate.compare.models", "a plugged model's speedups against the built-in model's, same cells"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
    return "usage: python -m compile_study <command> [args]\n\ncommands:\n" + "\n".join(lines)


def one_line(e: BaseException) -> str | None:
    """A known error as the one line a user needs (None: a fault of the code, whose traceback is kept): a bad
    input named in its message (core/errors.py), a file that cannot be read or written, with its path, or a
    child process that ended badly after printing its own message."""
    if isinstance(e, InputError):
        return str(e)
    if isinstance(e, OSError):
        paths = " -> ".join(str(p) for p in (e.filename, e.filename2) if p is not None)
        return f"{paths}: {e.strerror}" if paths else str(e)  # a DiskFullError's str names its path
    if isinstance(e, subprocess.CalledProcessError):
        return f"{shlex.join(map(str, e.cmd[:3]))} ... ended with exit status {e.returncode} (its message is above)"
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(usage(), file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    module = importlib.import_module(f"compile_study.{COMMANDS[argv[0]][0]}")
    sys.argv = [f"python -m compile_study {argv[0]}", *argv[1:]]
    try:
        return module.main(argv[1:]) or 0
    except SystemExit as stop:  # a command's own refusal (its message, as the interpreter would print it)
        if not isinstance(stop.code, str):
            raise
        print(stop.code, file=sys.stderr)
        return 2
    except Exception as e:  # a known error is one line and exit status 2; any other keeps its traceback
        line = one_line(e)
        if line is None:
            raise
        print(f"{argv[0]}: {line}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
