"""Adapters for models under test. Importing this package registers every family."""

from actors.models import callable_model  # noqa: F401
from actors.models import hf_model, lexicon_models, sklearn_models  # noqa: F401
from actors.models import llm_zero_shot  # noqa: F401
