"""The engine that trains everything: the one training loop, the one checkpoint format, atomic
writes and the DDP helpers. It imports only :mod:`course_utils.core`."""
