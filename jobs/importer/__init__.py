"""``checkray import``: test suites made by other tools, as checkray suites."""
