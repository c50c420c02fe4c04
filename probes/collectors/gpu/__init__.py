"""GPU state for a hang diagnosis: utilization, power, memory, temperature, throttling, ECC.

NVIDIA GPUs are read through NVML (the ``nvidia-ml-py`` package, imported only inside
``NvmlBackend``), AMD GPUs through the ``amd-smi`` CLI (``rocm-smi`` as a fallback). The vendor
libraries and tools are "hardware seams": the backends only fetch raw values, everything that
interprets them (bitmask decoding, units, JSON shapes, the fact line) lives above the seam and is
tested with recorded real outputs through ``RecordedBackend``.

This runs on machines that are already in trouble. A wedged driver can hang ``nvmlInit`` or any
query, so the whole vendor session runs in a daemon thread with a hard time bound; one failing
call becomes ``None`` plus an entry in ``errors`` and never an exception. No GPU at all is not an
error: the snapshot says ``available=False`` with a note.
"""
