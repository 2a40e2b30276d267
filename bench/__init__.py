"""Benchmarks of the real bot process against the Discord and Generation API emulators.

``python -m bench [burst|rate|scale|all] [--quick]`` prints one table per scenario; the figures
and their analysis are recorded in ``docs/benchmarks.md``. It is a measurement, not a test: it
exits 0 whatever the figures are, and non-zero only when a scenario crashes.
"""
