"""Preloaded by one test's warm server: every child forked from it finds CUDA unusable (as after a fork of a
process that started CUDA), without a GPU."""

from compile_study.measure.process import child

child.bad_fork = lambda: True
