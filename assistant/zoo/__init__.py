"""The hang zoo: small jobs that really hang in the ways training jobs do.

Used by `debug-stuck demo`, by the tests and by the benchmarks. Each program is a script run in
its own session (`spawn.start`); it writes `$ZOO_WORKDIR/READY` once its hang is real.
"""
