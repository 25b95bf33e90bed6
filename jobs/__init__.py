"""checkray's jobs: the CLI, the job table, configs, and each method's job and report."""

# One name per module: from the repository root this folder would also import as `jobs`,
# a second copy of every module (two classes, two registries); see checkray/__init__.py.
if __name__ != "checkray.jobs":
    raise ImportError(f"import checkray.jobs, not {__name__}: checkray's layers import only under checkray")
