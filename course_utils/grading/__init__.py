"""The grader: one hand-in's way from a folder to a gradebook row, each step one module.

find (``submissions``: which files are hand-ins, one row per student; ``lms_names``: the LMS's
bulk-download names; ``roster``: the LMS's class list) -> read (``submissions``: the notebook, read
without following links, into a private copy) -> limit (``sandbox``: namespaces, per-process caps;
``limiter``: the hand-in's total memory and processes in a cgroup; ``unprivileged``: the kernel as
nobody where namespaces are refused) -> execute (``autograde``, ``workers``: nbgrader's autograder
in the sandboxed kernel, timeouts, output caps) -> verify (``verify``, ``forbidden``, ``repair``:
values re-checked outside the kernel, forbidden calls, restored cells; ``scoring``: those rules
applied to the row) -> gradebook (``gradebook``, ``cache``: the CSV, feedback, what a re-grade may
reuse) -> the class's rules (``late``, ``adjustments``, ``course_rules``) and the LMS's import file
(``lms_export``). ``nbgrader_lab`` drives nbgrader (the lab generated from its solution);
``orchestrate`` strings the steps together over a class folder (the reference run, one worker per
hand-in, the cache); ``settings`` holds the grader's settings; ``command`` is the ``grade``
command; ``gradescope`` runs the same steps inside Gradescope's container.

A layer beside ``tools``: it imports the core, the engine and the lessons (whose checks record the
values it verifies); the tools (the command tree, ``doctor``) may import it.
"""
