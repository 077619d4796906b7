"""``python -m course_utils doctor``: is this environment ready for the course? Says what to fix."""

from __future__ import annotations

import importlib
import os
import platform
import sys

# (import name, what it is for, how to fix a failed import)
REQUIRED = [
    (
        "torch",
        "the models",
        "pip install torch  (CPU-only: add --index-url https://download.pytorch.org/whl/cpu)",
    ),
    ("numpy", "arrays", "pip install -r requirements.txt"),
    ("matplotlib", "figures", "pip install -r requirements.txt"),
    ("ipywidgets", "sliders and quizzes", "pip install -r requirements.txt; reload JupyterLab"),
    ("jupyterlab", "the course itself", "pip install -r requirements.txt"),
    ("tqdm", "progress bars", "pip install -r requirements.txt"),
]
FOR_TESTS = [
    ("pytest", "the test suite", "pip install -r requirements.txt"),
    ("nbval", "checking notebook outputs", "pip install -r requirements.txt"),
    ("nbstripout", "clean notebooks in git", "pip install -r requirements.txt"),
    ("nbgrader", "labs and grading", "pip install -r requirements.txt"),
]


def check_imports(packages) -> list[tuple[str, str, str | None]]:
    """(name, version or error, fix) per package; fix is None when the import worked."""
    results = []
    for name, _purpose, fix in packages:
        try:
            module = importlib.import_module(name)
            results.append((name, getattr(module, "__version__", "ok"), None))
        except Exception as exc:  # any failure to import is a finding, not a crash
            results.append((name, f"FAILED ({type(exc).__name__}: {exc})", fix))
    return results


def main(argv: list[str] | None = None) -> int:
    print(f"python:  {sys.version.split()[0]} at {sys.executable}")
    print(f"system:  {platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores")
    failures = 0
    try:
        import torch

        from ..core.device import DEVICE_ENV, pick_device

        cuda = torch.version.cuda or "none (CPU-only build)"
        print(f"torch:   {torch.__version__}, CUDA build: {cuda}")
        omp = os.environ.get("OMP_NUM_THREADS", "unset")
        print(f"threads: torch uses {torch.get_num_threads()} (OMP_NUM_THREADS={omp})")
        try:
            print(f"device:  {pick_device()} ({DEVICE_ENV}={os.environ.get(DEVICE_ENV, 'unset')})")
        except ValueError as exc:
            print(f"device:  FAILED: {exc}")
            failures += 1
    except Exception as exc:
        print(f"torch:   FAILED to import ({exc})")
    for title, group in (("required", REQUIRED), ("for tests and grading", FOR_TESTS)):
        print(f"packages ({title}):")
        for name, status, fix in check_imports(group):
            print(f"  {name:<11} {status}")
            if fix:
                print(f"  {'':<11} FIX: {fix}")
                failures += 1
    print("all good" if not failures else f"{failures} problem(s) found: apply the FIX lines above")
    return 1 if failures else 0
