"""The KubeRay manifests against KubeRay's own CRD schemas, and their Serve config built.

The CRDs are read from `../shared/kuberay-crds` (their README names the KubeRay version);
the tests skip where that folder is absent. Kubernetes itself prunes unknown fields
silently, so the schemas are made strict here (no field the CRD does not declare), as
`kubectl apply --validate=strict` would report them.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "deployments" / "kuberay"
CRDS = ROOT.parent / "shared" / "kuberay-crds"
SECRET_KEYS = {"api_keys", "watermark.key", "llm-api-key", "redis-password"}
"""Keys of the `swarm-ray-secrets` Secret that README.md tells users to create."""

needs_crds = pytest.mark.skipif(not CRDS.is_dir(), reason=f"no KubeRay CRDs at {CRDS}")


def _strict(schema: Any) -> Any:
    """The schema with `additionalProperties: false` wherever it lists properties."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


_SCHEMAS: dict[str, dict[str, Any]] = {}


def _schema(kind: str) -> dict[str, Any]:
    if kind not in _SCHEMAS:
        crd = yaml.safe_load((CRDS / f"ray.io_{kind.lower()}s.yaml").read_text())
        assert crd["spec"]["names"]["kind"] == kind
        (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        assert v1["served"] and v1["storage"]
        schema = copy.deepcopy(v1["schema"]["openAPIV3Schema"])
        schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: checked by the API
        _SCHEMAS[kind] = _strict(schema)
    return _SCHEMAS[kind]


def _errors(document: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(_schema(document["kind"]))
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message[:200]}"
        for e in validator.iter_errors(document)
    ]


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def _one(name: str, kind: str) -> dict[str, Any]:
    (document,) = [d for d in _documents(name) if d["kind"] == kind]
    assert document["apiVersion"] == "ray.io/v1"
    return document


def _cluster(document: dict[str, Any]) -> dict[str, Any]:
    spec = document["spec"]
    cluster: dict[str, Any] = spec.get("rayClusterConfig") or spec.get("rayClusterSpec") or spec
    return cluster


def _pods(cluster: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    groups = [("head", cluster["headGroupSpec"])]
    groups += [(g["groupName"], g) for g in cluster.get("workerGroupSpecs", [])]
    return [(name, group["template"]["spec"]) for name, group in groups]


MANIFEST_KINDS = [
    ("rayservice.yaml", "RayService"),
    ("rayjob.yaml", "RayJob"),
    ("raycluster.yaml", "RayCluster"),
]


@needs_crds
@pytest.mark.parametrize(("name", "kind"), MANIFEST_KINDS)
def test_manifest_is_valid_against_the_kuberay_crd(name: str, kind: str) -> None:
    document = _one(name, kind)
    assert _errors(document) == []
    cluster = _cluster(document)
    assert cluster["rayVersion"] == "2.60.0"
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["authOptions"]["mode"] == "token"  # Ray's token auth, as on `ray start`
    for group, pod in _pods(cluster):
        (container,) = pod["containers"]
        limits = container["resources"]["limits"]
        requests = container["resources"]["requests"]
        if group == "gpu":
            assert limits["nvidia.com/gpu"] == requests["nvidia.com/gpu"] == "1"
            assert container["image"].endswith("-gpu")
        else:
            assert "nvidia.com/gpu" not in limits
        assert "headService" not in cluster["headGroupSpec"]  # the dashboard stays ClusterIP
        assert not cluster["headGroupSpec"].get("enableIngress")


@needs_crds
def test_strict_validation_catches_a_misspelt_field() -> None:
    document = _one("rayservice.yaml", "RayService")
    broken = copy.deepcopy(document)
    broken["spec"]["rayClusterConfig"]["enableInTreeAutoscalling"] = True
    assert any("enableInTreeAutoscalling" in e for e in _errors(broken))
    wrong_type = copy.deepcopy(document)
    wrong_type["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["maxReplicas"] = "eight"
    assert any("maxReplicas" in e for e in _errors(wrong_type))


def test_rayservice_serve_config_builds_through_serves_own_loader() -> None:
    from ray._common.utils import import_attr
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary
    from ray.serve.schema import ServeDeploySchema

    from swarm_ray.gateway import GatewayConfig
    from swarm_ray.llm import LLMAppArgs

    document = _one("rayservice.yaml", "RayService")
    config = ServeDeploySchema.model_validate(yaml.safe_load(document["spec"]["serveConfigV2"]))
    apps = {app.name: app for app in config.applications}
    assert set(apps) == {"swarm-gateway", "llm-vllm"}
    built = {
        name: call_user_app_builder_with_args_if_necessary(import_attr(app.import_path), app.args)
        for name, app in apps.items()
    }
    gateway = built["swarm-gateway"]._bound_deployment
    args = GatewayConfig.model_validate(apps["swarm-gateway"].args)
    assert apps["swarm-gateway"].route_prefix == "/"
    assert gateway.num_replicas == args.num_replicas
    llm = built["llm-vllm"]._bound_deployment
    llm_args = LLMAppArgs.model_validate(apps["llm-vllm"].args)
    assert llm_args.engine.kind == "vllm"
    assert llm.ray_actor_options["num_gpus"] == 0.25  # four replicas per GPU
    scaling = llm._deployment_config.autoscaling_config
    assert scaling.min_replicas == 4 and scaling.max_replicas > scaling.min_replicas


def _env(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (container,) = pod["containers"]
    return {e["name"]: e for e in container.get("env", [])}


def test_secrets_come_from_the_secret_and_state_lives_in_redis() -> None:
    readme = (MANIFESTS / "README.md").read_text()
    for key in SECRET_KEYS:
        assert f"{key}=" in readme, f"README.md does not say how to create `{key}`"
    for name, kind in MANIFEST_KINDS:
        text = (MANIFESTS / name).read_text()
        assert not re.search(r"(?i)password:[ \t]*[^\s{]", text), name  # only references
        for _group, pod in _pods(_cluster(_one(name, kind))):
            env = _env(pod)
            for variable in env.values():
                ref = variable.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] == "swarm-ray-secrets" and ref["key"] in SECRET_KEYS
            for volume in pod.get("volumes", []):
                if "secret" in volume:
                    assert volume["secret"]["secretName"] == "swarm-ray-secrets"
                    assert volume["secret"]["defaultMode"] == 0o400
                    assert {i["key"] for i in volume["secret"]["items"]} <= SECRET_KEYS
            assert env["SWARM_RAY_WATERMARK_KEY_FILE"]["value"].startswith("/etc/swarm-ray/")
    for _group, pod in _pods(_cluster(_one("rayservice.yaml", "RayService"))):
        env = _env(pod)
        assert env["SWARM_RAY_STATE_URL"]["value"] == (
            "redis://:$(REDIS_PASSWORD)@swarm-ray-redis:6379/0"
        )
        names = list(env)  # Kubernetes expands $(VAR) only from variables defined earlier
        assert names.index("REDIS_PASSWORD") < names.index("SWARM_RAY_STATE_URL")
        assert env["SWARM_RAY_API_KEYS_FILE"]["value"] == "/etc/swarm-ray/api_keys"
    service = _one("rayservice.yaml", "RayService")["spec"]
    assert service["serveService"]["spec"]["type"] == "ClusterIP"
    fault_tolerance = service["rayClusterConfig"]["gcsFaultToleranceOptions"]
    assert fault_tolerance["redisAddress"] == "redis://swarm-ray-redis:6379"


def test_rayjob_runs_the_compare_job_with_options_it_has() -> None:
    job = _one("rayjob.yaml", "RayJob")["spec"]
    words = shlex.split(job["entrypoint"])
    assert words[:2] == ["python", "/app/jobs/compare_documents.py"]
    assert (ROOT / "jobs" / "compare_documents.py").is_file()
    source = (ROOT / "swarm_ray" / "documents" / "_job.py").read_text()
    for flag in (w for w in words if w.startswith("--")):
        assert f'"{flag}"' in source, f"jobs/compare_documents.py has no option {flag}"
    assert words[words.index("--input") + 1].startswith("s3://")
    assert job["shutdownAfterJobFinishes"] is True
