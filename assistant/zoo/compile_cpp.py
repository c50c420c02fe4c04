"""Not hung: a job's first step compiling C++ (no cause; undecided, nobody blamed).

``python compile_cpp.py``. Like Inductor's CPU kernels (torch/_inductor/cpp_builder.py runs the
compiler with subprocess for each kernel) or a torch.utils.cpp_extension build, the job writes a
C++ file and runs ``g++ -c`` on it with ``subprocess.run``: its main thread waits in
``communicate``/``wait``, g++ waits for ``cc1plus``, and ``cc1plus`` computes (here a constexpr loop
that keeps it busy for hours, as a large kernel or extension keeps it for minutes). The log says
the first step is compiling.

READY (``{"pid", "compiler"}``): once a cc1plus under the job has been running for a second.
"""

from __future__ import annotations

import os
import subprocess
import time

import _common

KERNEL = """constexpr unsigned long long spin(unsigned long long n) {
    unsigned long long s = 0;
    for (unsigned long long i = 0; i < n; ++i) s += i ^ (s >> 3);
    return s;
}
static_assert(spin(2000000000ULL) != 1, "the compile is the work");
"""


def compiler_running() -> int | None:
    """The pid of a cc1plus under this process that has run for a second, or None."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        ticks = int(fields[11]) + int(fields[12])  # utime + stime
        if name == "cc1plus" and ticks >= os.sysconf("SC_CLK_TCK") and _under_us(int(entry)):
            return int(entry)
    return None


def _under_us(pid: int) -> bool:
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
        if pid == os.getpid():
            return True
    return False


def main() -> None:
    source = _common.workdir() / "kernel.cpp"
    source.write_text(KERNEL)
    found: dict = {}

    def compiling() -> bool:
        found["compiler"] = compiler_running()
        return found["compiler"] is not None

    _common.ready_when(compiling, info=lambda: dict(found))
    print(f"{time.strftime('%H:%M:%S')} compiling the model's kernels for the first step ...", flush=True)
    limits = ["-fconstexpr-loop-limit=2147483647", "-fconstexpr-ops-limit=4611686018427387904"]
    subprocess.run(["g++", "-std=c++17", *limits, "-c", str(source), "-o", str(source.with_suffix(".o"))], check=True)


if __name__ == "__main__":
    main()
