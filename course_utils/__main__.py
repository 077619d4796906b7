"""Command line: ``python -m course_utils COMMAND``; ``--help`` lists the commands."""

from __future__ import annotations

import sys

USAGE = """usage: python -m course_utils COMMAND [ARGS]

commands:
  bookgpt prepare --corpus default|DIR --out DIR
                          split books 90/10, write train/val .bin + meta.json, print an audit
  bookgpt train --config cpu|baseline|larger|ctx512 [--max-steps N] [--out DIR] [--resume]
                          train BookGPT (resumable; DDP under torchrun)
  bookgpt sample CKPT --prompt TEXT --tokens N --temperature T --top-k K --seed S
                          generate text from a BookGPT checkpoint
  doctor                  check this environment and say how to fix what is missing
  flops [options]         a forward/training FLOP table for a model configuration
  gradescope LAB --out ZIP  write a Gradescope autograder bundle for a lab
  grade LAB SUBMISSIONS --out CSV [--feedback DIR] [--jobs N] [--memory 4G] [--no-sandbox]
                          autograde collected submissions of a lab, each in a sandbox
  inspect [options]       parameter split, training memory and container audit of a model
  labs build|check        regenerate labs/ from solutions/, or check they are in sync
  publish NOTEBOOK...     re-run lessons or solutions, clean them, rebuild the labs
  sumgpt train|eval ...    train SumGPT (3-digit addition) or score a checkpoint on held-out sums
  setup-git               install the per-folder nbstripout git filters
"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    command, rest = argv[0], argv[1:]
    if command == "bookgpt":
        from .projects.bookgpt import main as run
    elif command == "doctor":
        from .tools.doctor import main as run
    elif command == "flops":
        from .core.flops import main as run
    elif command == "grade":
        from .tools.grading import main as run
    elif command == "gradescope":
        from .tools.gradescope import main as run
    elif command == "inspect":
        from .lessons.inspector import main as run
    elif command == "labs":
        from .tools.labs import main as run
    elif command == "publish":
        from pathlib import Path

        from .tools.publish import publish

        if not rest:
            print("usage: python -m course_utils publish NOTEBOOK...", file=sys.stderr)
            return 2
        publish([Path(p) for p in rest])
        return 0
    elif command == "sumgpt":
        from .projects.sumgpt import main as run
    elif command == "setup-git":
        from .tools.publish import setup_git

        setup_git()
        return 0
    else:
        print(f"unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    return run(rest)


if __name__ == "__main__":
    sys.exit(main())
