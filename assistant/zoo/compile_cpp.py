"""Not hung: a job's first step compiling C++ (progressing, nobody blamed).

``python compile_cpp.py``. Like Inductor's CPU kernels (torch/_inductor/cpp_builder.py runs the
compiler with subprocess for each kernel) or a torch.utils.cpp_extension build, the job writes a
C++ file and runs ``g++ -c`` on it with ``subprocess.run``: its main thread waits in
``communicate``/``wait``, g++ waits for ``cc1plus``, and ``cc1plus`` computes (here a constexpr loop
that keeps it busy for hours, as a large kernel or extension keeps it for minutes). The log says
the first step is compiling.

READY (``{"pid", "compiler"}``): once a cc1plus under the job has been running for a second.
"""

from __future__ import annotations

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
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == "cc1plus" and sum(child.cpu_times()[:2]) >= 1.0:
                return child.pid
        except psutil.Error:
            continue
    return None


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
