"""What the notebooks call besides the core: one-line exercise checks, widgets and quizzes, the
frozen-decoder audit, initialization checks and the model inspector."""
