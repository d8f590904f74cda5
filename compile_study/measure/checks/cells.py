"""The configurations a method check measures, where the plan must know them too (torch-free).

The timer check (measure/checks/timer_check.py) times these (compile mode, batch size) cases per device: a host-bound and
a device-bound batch, each compiled mode beside eager at its batch, so that a correction of a speedup has both of
its sides timed. The plan (plan/study.py timer_cells) gives the check the caches the compile phase filled for the
grid's configurations of these cases, so that it compiles nothing cold.
"""

TIMER_CASES = {"cuda": (("eager", 32), ("reduce-overhead", 32), ("eager", 512), ("default", 512)),
               "cpu": (("eager", 16), ("default", 16))}
