"""checkray's actors: what holds a model or a GPU (model adapters, actor pools, builtin assets)."""

# One name per module: from the repository root this folder would also import as `actors`,
# a second copy of every module (two classes, two registries); see checkray/__init__.py.
if __name__ != "checkray.actors":
    raise ImportError(f"import checkray.actors, not {__name__}: checkray's layers import only under checkray")
