"""Install the right torch before the rest of the course: the CPU build on a machine without an
NVIDIA GPU, the default (CUDA) build where ``nvidia-smi`` finds one or on macOS, and nothing when
a torch is already installed. It says which one it chose. Whether PyTorch's CPU index can be
reached is asked once, with a short timeout: where it cannot, pip would retry every request for
minutes before failing, so the default index is used at once, with one line saying so.

Run by ``make setup`` as ``python course_utils/tools/torch_setup.py`` in the course's
environment, before ``pip install -r requirements.txt``: plain ``pip install torch`` on a Linux
box without a GPU pulls a multi-GB CUDA build that the box cannot use. Standard library only,
since nothing else is installed yet.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

try:
    from course_utils.tools.python_check import refusal
except ImportError:  # run as a script (make setup), with its own folder on sys.path
    from python_check import refusal

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROBE_SECONDS = 5  # one request to the CPU index; pip alone would retry each file for minutes
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
REPORT = (
    "import torch; cuda = torch.version.cuda; "
    "print(f'torch {torch.__version__}, ' + (f'CUDA {cuda} build' if cuda else 'CPU-only build'))"
)


def torch_requirement(pyproject: Path = PYPROJECT) -> str:
    """The torch requirement of the course package (``torch>=2.9,<3``), from pyproject.toml."""
    import tomllib  # Python 3.11+: main() refuses an older Python in one line first

    deps = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    return next(d for d in deps if d.replace(" ", "").startswith(("torch>", "torch<", "torch=")))


def installed_torch(python: str = sys.executable) -> str | None:
    """A one-line description of the torch ``python`` imports, or None when there is none."""
    result = subprocess.run([python, "-c", REPORT], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


def has_nvidia_gpu() -> bool:
    """Whether ``nvidia-smi`` is on PATH and lists a GPU."""
    if shutil.which("nvidia-smi") is None:
        return False
    result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return result.returncode == 0 and "GPU" in result.stdout


def index_reachable(url: str = CPU_INDEX, timeout: float = PROBE_SECONDS) -> bool:
    """Whether one request to ``url`` answers within ``timeout`` seconds (any HTTP status counts:
    the host is there). Asked once, so a box without the index falls back at once."""
    try:
        with urllib.request.urlopen(f"{url}/torch/", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):  # no route, no name, refused, timed out
        return False


def pip_install(requirement: str, *extra: str) -> int:
    quiet = ["-q", "--disable-pip-version-check"]  # its warnings and errors still show
    return subprocess.call([sys.executable, "-m", "pip", "install", *quiet, requirement, *extra])


def main() -> int:
    wrong_python = refusal()
    if wrong_python:
        print(wrong_python, file=sys.stderr)
        return 1
    found = installed_torch()
    if found:
        print(f"torch setup: keeping the installed {found}")
        return 0
    requirement = torch_requirement()
    if sys.platform == "darwin" or has_nvidia_gpu():
        why = "macOS" if sys.platform == "darwin" else "an NVIDIA GPU was found (nvidia-smi)"
        print(f"torch setup: {why}: installing {requirement} from the default index")
        status = pip_install(requirement)
    elif not index_reachable():
        print(
            f"torch setup: no NVIDIA GPU, but {CPU_INDEX} did not answer within "
            f"{PROBE_SECONDS} s: installing {requirement} from the default index (on Linux that "
            "is the multi-GB CUDA build, unless a CPU wheel is already at hand)"
        )
        status = pip_install(requirement)
    else:
        print(f"torch setup: no NVIDIA GPU: installing the CPU-only {requirement} from {CPU_INDEX}")
        status = pip_install(requirement, "--index-url", CPU_INDEX, "--timeout", "30")
        if status != 0:
            print(
                f"torch setup: installing from {CPU_INDEX} failed; falling back to the default "
                f"index (on Linux that is the multi-GB CUDA build)"
            )
            status = pip_install(requirement)
    if status == 0:
        print(f"torch setup: installed {installed_torch()}")
    return status


if __name__ == "__main__":
    sys.exit(main())
