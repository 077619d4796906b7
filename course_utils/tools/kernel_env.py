"""The course's Jupyter kernels wait without spinning: ``OMP_WAIT_POLICY=PASSIVE``.

OpenMP's threads (torch's CPU kernels) otherwise spin while they wait for work; on a laptop busy
with other programs that makes two threads many times slower than one (lesson 13 measured 26x,
lesson 11's training took 953 s instead of 2.5-4.5 minutes at a load of 3-5). libgomp reads the
variable once, when torch loads it, so it must be in the kernel's environment before any import:
an IPython config file in the environment (``{sys.prefix}/etc/ipython``), which every kernel of
that environment reads at start, however it was opened (``make course``, ``gpt-course open``, a
plain ``jupyter lab``). ``make setup`` and ``gpt-course open`` install it; a value set by hand
(``OMP_WAIT_POLICY=ACTIVE jupyter lab``) is kept. CI sets the same policy in its environment.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

VARIABLE, POLICY = "OMP_WAIT_POLICY", "PASSIVE"
MARK = "# gpt-course: the course's kernels wait without spinning"
BLOCK = f"""{MARK} (course_utils/tools/kernel_env.py).
# OpenMP threads that spin while they wait make torch many times slower on a busy laptop; libgomp
# reads this once, when torch loads it. A value set by hand is kept.
import os as _os

_os.environ.setdefault("{VARIABLE}", "{POLICY}")
"""


def config_path(prefix: str | Path = sys.prefix) -> Path:
    """The kernel config file every IPython kernel of the environment at ``prefix`` reads."""
    return Path(prefix) / "etc" / "ipython" / "ipython_kernel_config.py"


def install(prefix: str | Path = sys.prefix) -> Path:
    """Add the course's block to the environment's kernel config (kept as it is when already
    there; other settings in the file stay). Returns the file; OSError when it is not writable."""
    path = config_path(prefix)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if MARK not in text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + ("\n" if text and not text.endswith("\n") else "") + BLOCK,
                        encoding="utf-8")  # fmt: skip
    return path


def ensure(prefix: str | Path = sys.prefix) -> str:
    """Install the block where possible; the one line that says what the kernels will get."""
    try:
        path = install(prefix)
    except OSError as exc:
        return (
            f"kernels: could not write {config_path(prefix)} ({exc.strerror}): set "
            f"{VARIABLE}={POLICY} before starting JupyterLab"
        )
    return f"kernels: wait without spinning ({VARIABLE}={POLICY}, set in {path})"


def policy_line(prefix: str | Path = sys.prefix) -> str:
    """What a kernel of this environment will run with, for ``doctor``."""
    path = config_path(prefix)
    installed = path.exists() and MARK in path.read_text(encoding="utf-8", errors="replace")
    own = os.environ.get(VARIABLE)
    if own:
        source = "from the environment you started in" + (
            f", over the course's {POLICY}" if installed and own.upper() != POLICY else ""
        )
        return f"kernels: {VARIABLE}={own} ({source})"
    if installed:
        return f"kernels: {VARIABLE}={POLICY}, set by {path}: threads wait without spinning"
    return (
        f"kernels: {VARIABLE} unset, so OpenMP threads spin while they wait (slow on a busy "
        "laptop); FIX: make setup (or gpt-course open), which sets PASSIVE for this environment"
    )


def main() -> int:
    """``python -m course_utils.tools.kernel_env`` (``make setup``): install, say it in a line."""
    print(ensure())
    return 0


if __name__ == "__main__":
    sys.exit(main())
