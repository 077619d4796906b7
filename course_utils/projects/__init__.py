"""The course's two projects, each a recipe for the engine: data, a configuration and an
evaluation. SumGPT adds three-digit numbers; BookGPT writes text like its book corpus."""
