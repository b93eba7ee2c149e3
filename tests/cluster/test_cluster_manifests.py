"""The files under cluster/ are valid for the tools that consume them, consistent with each other and
with the project, and free of credentials.

Launcher YAMLs are checked against the schema Ray ships and by Ray's own ``prepare_config`` /
``validate_config`` (what ``ray up`` runs before touching a cloud). KubeRay manifests are checked
structurally: the fields the operator requires, and container resources that match the Ray
resources each group advertises, since a mismatch makes the autoscaler wait for GPUs or CPUs a pod
does not have.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import ray
import yaml

from orchestrl.cluster import packaging, tracking_policy

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "cluster"
LAUNCHER_YAMLS = sorted(CLUSTER.glob("*.yaml"))
KUBERAY_YAMLS = sorted((CLUSTER / "kuberay").glob("*.yaml"))
RAY_VERSION = ray.__version__


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def test_the_expected_cluster_files_exist() -> None:
    names = {p.relative_to(CLUSTER).as_posix() for p in CLUSTER.rglob("*") if p.is_file()}
    assert {
        "aws-gpu.yaml",
        "gcp-gpu.yaml",
        "kuberay/raycluster.yaml",
        "kuberay/rayjob.yaml",
        "README.md",
    } <= names


# ---------------------------------------------------------------------------------------------
# Ray cluster launcher


@pytest.fixture(scope="module")
def ray_schema() -> dict[str, Any]:
    import ray.autoscaler

    return json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())


@pytest.mark.parametrize("path", LAUNCHER_YAMLS, ids=lambda p: p.name)
def test_launcher_yaml_validates_against_rays_schema(path: Path, ray_schema: dict[str, Any]) -> None:
    jsonschema.validate(load(path), ray_schema)


@pytest.mark.parametrize("path", LAUNCHER_YAMLS, ids=lambda p: p.name)
def test_launcher_yaml_passes_rays_own_config_checks(path: Path) -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    prepared = prepare_config(copy.deepcopy(load(path)))  # fills provider defaults, as `ray up` does
    validate_config(prepared)
    assert prepared["head_node_type"] in prepared["available_node_types"]


def _head_start(config: dict[str, Any]) -> str:
    return " ".join(config["head_start_ray_commands"])


@pytest.mark.parametrize("path", LAUNCHER_YAMLS, ids=lambda p: p.name)
def test_launcher_has_cpu_head_gpu_learners_and_cpu_env_runners(path: Path) -> None:
    config = load(path)
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0
    assert head["resources"].get("CPU") == 0 and "--num-cpus=0" in _head_start(config)
    workers = {name: t for name, t in types.items() if name != config["head_node_type"]}
    gpu = [t for t in workers.values() if t["resources"].get("GPU", 0) >= 1]
    cpu = [
        t for t in workers.values() if t["resources"].get("GPU", 0) == 0 and t["resources"].get("CPU", 0) > 0
    ]
    assert gpu and cpu, "need a GPU worker type (learners) and a CPU-only one (env runners)"
    for node_type in workers.values():
        assert 0 <= node_type["min_workers"] <= node_type["max_workers"]
    assert all(t["max_workers"] > 0 for t in gpu + cpu), "both worker types must be able to scale up"
    assert sum(t["max_workers"] for t in workers.values()) <= config["max_workers"]
    assert config["idle_timeout_minutes"] > 0


@pytest.mark.parametrize("path", LAUNCHER_YAMLS, ids=lambda p: p.name)
def test_launcher_dashboard_listens_on_loopback_only(path: Path) -> None:
    config = load(path)
    start = _head_start(config)
    assert "--dashboard-host=127.0.0.1" in start
    assert "0.0.0.0" not in path.read_text()
    assert "--host 127.0.0.1" in start, "the head's MLflow server must be loopback-only too"


@pytest.mark.parametrize("path", LAUNCHER_YAMLS, ids=lambda p: p.name)
def test_launcher_installs_pinned_torch_then_the_project(path: Path) -> None:
    config = load(path)
    commands = config["setup_commands"]
    torch_at = commands.index("pip install torch==2.13.0")
    project_at = next(i for i, c in enumerate(commands) if "orchestrl" in c and "pip install" in c)
    assert torch_at < project_at


@pytest.mark.parametrize("path", LAUNCHER_YAMLS, ids=lambda p: p.name)
def test_launcher_images_run_this_ray_version_on_python_311(path: Path) -> None:
    config = load(path)
    images = [config["docker"]["image"]]
    images += [t["docker"]["worker_image"] for t in config["available_node_types"].values() if "docker" in t]
    assert len(images) >= 2
    for image in images:
        assert image.startswith(f"rayproject/ray:{RAY_VERSION}-py311"), image
    assert any(image.endswith("-gpu") for image in images)


# ---------------------------------------------------------------------------------------------
# KubeRay


def _cluster_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]


def _groups(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("head", spec["headGroupSpec"])] + [(g["groupName"], g) for g in spec["workerGroupSpecs"]]


def _cpu_quantity(value: str | int | float) -> float:
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


@pytest.mark.parametrize("path", KUBERAY_YAMLS, ids=lambda p: p.name)
def test_kuberay_manifest_has_the_required_fields(path: Path) -> None:
    doc = load(path)
    assert doc["apiVersion"] == "ray.io/v1"
    assert doc["kind"] in ("RayCluster", "RayJob")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])
    spec = _cluster_spec(doc)
    assert spec["rayVersion"] == RAY_VERSION
    assert spec["enableInTreeAutoscaling"] is True
    assert spec["headGroupSpec"]["template"]["spec"]["containers"]
    for name, group in _groups(spec):
        assert isinstance(group["rayStartParams"], dict), name
        assert all(isinstance(v, str) for v in group["rayStartParams"].values()), (
            f"{name}: values are strings"
        )
        if name != "head":
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)
            assert 0 <= group["minReplicas"] <= group.get("replicas", 0) <= group["maxReplicas"]
            assert group["maxReplicas"] > 0


@pytest.mark.parametrize("path", KUBERAY_YAMLS, ids=lambda p: p.name)
def test_kuberay_container_resources_match_ray_resources(path: Path) -> None:
    spec = _cluster_spec(load(path))
    for name, group in _groups(spec):
        params = group["rayStartParams"]
        container = group["template"]["spec"]["containers"][0]
        assert container["image"].startswith(f"rayproject/ray:{RAY_VERSION}-py311"), name
        requests, limits = container["resources"]["requests"], container["resources"]["limits"]
        gpus = int(params.get("num-gpus", "0"))
        assert int(limits.get("nvidia.com/gpu", 0)) == gpus, f"{name}: GPU limit vs num-gpus"
        assert int(requests.get("nvidia.com/gpu", 0)) == gpus, f"{name}: GPU request vs num-gpus"
        if gpus:
            assert container["image"].endswith("-gpu"), f"{name}: GPU group needs the CUDA image"
        if "num-cpus" in params and name != "head":  # the head advertises 0 on purpose
            assert _cpu_quantity(limits["cpu"]) == float(params["num-cpus"]), f"{name}: cpu limit vs num-cpus"
        assert _cpu_quantity(requests["cpu"]) == _cpu_quantity(limits["cpu"]), f"{name}: guaranteed cpu"
        assert requests["memory"] == limits["memory"], f"{name}: guaranteed memory"


@pytest.mark.parametrize("path", KUBERAY_YAMLS, ids=lambda p: p.name)
def test_kuberay_has_gpu_learners_and_cpu_env_runners(path: Path) -> None:
    spec = _cluster_spec(load(path))
    workers = spec["workerGroupSpecs"]
    assert any(int(g["rayStartParams"].get("num-gpus", "0")) >= 1 for g in workers)
    assert any("num-gpus" not in g["rayStartParams"] for g in workers)
    assert spec["headGroupSpec"]["rayStartParams"].get("num-cpus") == "0"


@pytest.mark.parametrize("path", KUBERAY_YAMLS, ids=lambda p: p.name)
def test_kuberay_dashboard_is_not_exposed(path: Path) -> None:
    spec = _cluster_spec(load(path))
    head = spec["headGroupSpec"]
    assert head.get("serviceType", "ClusterIP") == "ClusterIP"
    assert not head.get("enableIngress", False)
    assert spec["authOptions"]["mode"] == "token"
    text = path.read_text()
    for exposed in ("LoadBalancer", "NodePort", "kind: Ingress", "hostNetwork: true"):
        assert exposed not in text


def test_rayjob_runs_what_orchestrl_submit_would_send() -> None:
    spec = load(CLUSTER / "kuberay" / "rayjob.yaml")["spec"]
    argv = shlex.split(spec["entrypoint"])
    assert argv[:3] == ["python", "-c", packaging.ORCHESTRL_LAUNCHER]
    packaging.validate_args(argv[3:])
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    assert runtime_env["pip"]["packages"] == packaging.read_requirements(ROOT / "pyproject.toml"), (
        "rayjob.yaml's pip list drifted from pyproject.toml's dependencies (minus ray)"
    )
    tracking = tracking_policy.find_tracking_uri(argv[3:], env=runtime_env.get("env_vars", {}), cwd=ROOT)
    tracking_policy.check_tracking_for_cluster(tracking, on_this_machine=False)
    assert spec["shutdownAfterJobFinishes"] is True
    assert spec["activeDeadlineSeconds"] > 0


def test_rayjob_working_dir_is_a_remote_archive_without_credentials() -> None:
    spec = load(CLUSTER / "kuberay" / "rayjob.yaml")["spec"]
    working_dir = yaml.safe_load(spec["runtimeEnvYAML"])["working_dir"]
    assert working_dir.startswith("https://") and working_dir.endswith(".zip")
    assert "@" not in working_dir.split("/")[2], "no user:token@ in the URL"


# ---------------------------------------------------------------------------------------------
# Credentials

SECRET_PATTERNS = {
    "AWS access key id": r"\b(AKIA|ASIA)[0-9A-Z]{16}\b",
    "AWS secret key": r"(?i)aws_secret_access_key\s*[:=]",
    "private key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    "GitHub token": r"\b(gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
    "Google API key": r"\bAIza[0-9A-Za-z_\-]{35}\b",
    "GCP service-account key": r"\"type\"\s*:\s*\"service_account\"",
    "Slack token": r"\bxox[abprs]-[0-9A-Za-z-]{10,}",
    "credentials in a URL": r"[a-z][a-z0-9+.-]*://[^/\s:@'\"]+:[^/\s@'\"]+@",
    # A literal value; "$(...)", "${VAR}", "<placeholder>" and quotes-only do not count.
    "literal password/secret/token": (
        r"(?i)(password|passwd|secret|token)['\"]?\s*[:=]\s*['\"]?(?![$'\"<{(])[^\s'\"]{8,}"
    ),
    "SSH key in the launcher": r"(?m)^\s*ssh_private_key\s*:",
}


def find_secrets(text: str) -> list[str]:
    return [name for name, pattern in SECRET_PATTERNS.items() if re.search(pattern, text)]


def test_the_secret_scanner_catches_what_it_looks_for() -> None:
    # Built at run time so that no file in the repository holds one of these strings.
    samples = {
        "AWS access key id": "key: AKIA" + "ABCDEFGHIJKLMNOP",
        "private key": "-----BEGIN OPENSSH " + "PRIVATE KEY-----",
        "GitHub token": "ghp_" + "a" * 36,
        "credentials in a URL": "https://user:" + "hunter22@github.com/o/r.zip",
        "literal password/secret/token": "MLFLOW_TRACKING_PASSWORD: " + "s3cr3tvalue",
        "SSH key in the launcher": "  ssh_private_key: ~/.ssh/" + "id_rsa",
    }
    for name, text in samples.items():
        assert name in find_secrets(text), name
    assert find_secrets('RAY_AUTH_TOKEN="$(kubectl get secret orchestrl -o jsonpath=...)"') == []


@pytest.mark.parametrize(
    "path",
    sorted(p for p in CLUSTER.rglob("*") if p.is_file()),
    ids=lambda p: p.relative_to(CLUSTER).as_posix(),
)
def test_no_credentials_in_cluster_files(path: Path) -> None:
    assert find_secrets(path.read_text()) == []
