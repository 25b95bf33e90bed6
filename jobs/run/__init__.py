"""``checkray run``: a user's corpus, models and LLM -> every method that applies -> one
merged, validated suite -> one benchmark and one report (``checkray demo`` is this job on
the embedded default, ``configs/demo.yaml``)."""
