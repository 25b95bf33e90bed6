"""A local Ray's session directory goes with the process that started it, unless kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

START_AND_EXIT = (
    "from checkray.engine.config import RuntimeConfig\n"
    "from checkray.engine.runtime import init_ray\n"
    "print(init_ray(RuntimeConfig(num_cpus=1, object_store_mb=80)))\n"
)


def start_local_ray(env_extra: dict) -> Path:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | env_extra
    done = subprocess.run([sys.executable, "-c", START_AND_EXIT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.mark.integration
def test_a_local_rays_directory_is_removed_at_exit_and_kept_on_request():
    removed = start_local_ray({})
    assert removed.name.startswith("cr") and not removed.exists()
    kept = start_local_ray({"CHECKRAY_KEEP_RAY_TEMP": "1"})
    try:
        assert (kept / "session_latest").exists()
    finally:
        subprocess.run(["rm", "-rf", str(kept)], check=False)
