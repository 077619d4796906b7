"""Which Python the course's environment is made with: a Python outside 3.11-3.13 is refused in
one line naming the fix, before anything is installed, and a ``.venv`` made by another Python
is found and rebuilt, so a student never has to delete it by hand.

``make`` runs it first, as ``$(PYTHON) course_utils/tools/python_check.py --venv .venv``, with
whatever Python the student named (``make course PYTHON=python3.12``), so it is written for any
Python 3 (no newer syntax, standard library only); where that Python does not start, ``make``
runs it with ``python3`` and ``--missing``. ``gpt-course`` and torch_setup.py use
:func:`refusal` too.
"""

import argparse
import os
import shutil
import subprocess
import sys

SUPPORTED = ((3, 11), (3, 12), (3, 13))  # as the README says; CI covers 3.11 and 3.13
EXAMPLE = "python3.12"


def version_text(version):
    return ".".join(str(part) for part in version)


def supported(version):
    """Whether a (major, minor, ...) version is one the course runs on."""
    return tuple(version[:2]) in SUPPORTED


def installed_supported_pythons():
    """The supported ``python3.X`` commands on PATH, newest first."""
    names = ["python" + version_text(version) for version in reversed(SUPPORTED)]
    return [name for name in names if shutil.which(name) and runs(name)]


def runs(command):
    """Whether ``command`` starts (a pyenv shim for a version not selected does not)."""
    try:
        return subprocess.run([command, "-c", ""], capture_output=True).returncode == 0
    except OSError:
        return False


def fix(command):
    """How to start over with a supported Python: ``command`` with PYTHON= set to one that is
    on PATH, or the advice to install one."""
    found = installed_supported_pythons()
    if found:
        return f"run `{command} PYTHON={found[0]}` ({found[0]} is on this machine)"
    return (
        "install Python 3.12 (python.org, or your system's python3.12 package) and run "
        f"`{command} PYTHON={EXAMPLE}`"
    )


def venv_fix():
    """The fix without make: a fresh environment made by a supported Python, the wheel in it."""
    found = installed_supported_pythons()
    python = found[0] if found else EXAMPLE
    return (
        f"make a fresh environment with a supported one (`{python} -m venv gpt-env`) and install "
        "the course there"
    )


def refusal(version=None, python=None, command="make course", how=None):
    """One line refusing an unsupported Python, naming the fix (``how``, or re-running
    ``command`` with PYTHON=); None for a supported one."""
    version = tuple(version or sys.version_info[:3])
    if supported(version):
        return None
    python = python or os.path.basename(sys.executable) or "python"
    found = version_text(version)
    how = how or fix(command)
    return f"setup: {python} is Python {found}, but the course needs 3.11 to 3.13: {how}"


def venv_version(venv):
    """The (major, minor) of the Python that made ``venv``, from its pyvenv.cfg; None when there
    is no such file."""
    config = os.path.join(venv, "pyvenv.cfg")
    if not os.path.isfile(config):
        return None
    values = {}
    with open(config, encoding="utf-8") as handle:
        for line in handle:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    text = values.get("version_info") or values.get("version") or ""
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def check(venv, python, chosen, command="make course"):
    """(status, line) for making or reusing ``venv``: status 0 to go on (line says what was done,
    or is empty), 1 to stop (line names the fix). ``chosen``: whether the student named the Python
    (PYTHON= on the command line), whose choice then wins over an existing venv's."""
    mine = tuple(sys.version_info[:2])
    if not os.path.lexists(venv):
        line = refusal(python=python, command=command)
        return (1, line) if line else (0, "")
    made_by = venv_version(venv)
    if made_by is not None and supported(made_by) and (made_by == mine or not chosen):
        return 0, ""  # a good venv is kept, whichever python3 there is now
    wanted = refusal(python=python, command=command)
    if wanted:
        return 1, wanted
    if made_by is None:
        why = "is not a virtual environment (no pyvenv.cfg)"
    else:
        why = f"was made by Python {version_text(made_by)}"
    if os.path.islink(venv) or made_by is None:
        again = f"`{command} PYTHON={python}`"
        return 1, f"setup: {venv} {why}: remove it (`rm -rf {venv}`) and run {again} again"
    shutil.rmtree(venv)
    mine = version_text(sys.version_info[:3])
    return 0, f"setup: {venv} {why}; removed it, to make it again with {python} (Python {mine})"


def missing(python, command="make course"):
    """One line for a PYTHON the student named that does not start here (not installed, or a
    pyenv shim for a version not selected), naming the fix."""
    return f"setup: {python} does not run on this machine: {fix(command)}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", default=".venv", help="the course's virtual environment")
    parser.add_argument("--python", default="python3", help="the PYTHON the student named")
    parser.add_argument("--chosen", action="store_true", help="PYTHON was named by the student")
    parser.add_argument("--command", default="make course", help="the command to suggest")
    parser.add_argument(
        "--missing", action="store_true", help="--python does not start: say so, and the fix"
    )
    args = parser.parse_args(argv)
    if args.missing:
        print(missing(args.python, args.command), file=sys.stderr)
        return 1
    status, line = check(args.venv, args.python, args.chosen, args.command)
    if line:
        print(line, file=sys.stderr if status else sys.stdout)
    return status


if __name__ == "__main__":
    sys.exit(main())
