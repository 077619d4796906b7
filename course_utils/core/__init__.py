"""The student-facing core: what the lessons build (model, tokenizer, configurations, ledgers,
FLOP counts, generation, devices and seeding). It imports nothing else of ``course_utils``."""
