"""``checkray review``: people check generated cases in the browser (docs/review.md)."""
