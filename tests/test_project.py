"""Project files people run directly: the cluster config and the README's commands."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_cluster_yaml_is_a_valid_launcher_config() -> None:
    schema = json.loads((resources.files("ray.autoscaler") / "ray-schema.json").read_text())
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    jsonschema.validate(config, schema)
    gpu = config["available_node_types"]["gpu_workers"]["resources"]
    assert gpu["GPU"] >= 1  # GPUs declared explicitly, so the autoscaler can place them
    # The dashboard's Jobs API runs any code: it listens on the head's loopback only.
    [head_start] = [c for c in config["head_start_ray_commands"] if "ray start" in c]
    assert "--dashboard-host=127.0.0.1" in head_start and "0.0.0.0" not in head_start


def test_the_cluster_gateway_speaks_tls_and_redis_needs_a_password() -> None:
    config = yaml.safe_load((ROOT / "deployments" / "gateway-gpu-cluster.yaml").read_text())
    http = config["http_options"]
    assert http["host"] == "0.0.0.0" and http["ssl_certfile"] and http["ssl_keyfile"]
    [gateway] = [a for a in config["applications"] if a["name"] == "swarm-gateway"]
    url = gateway["runtime_env"]["env_vars"]["SWARM_RAY_STATE_URL"]
    assert url.startswith("rediss://:") and "@" in url  # TLS and a password


def test_readme_names_exactly_two_setup_commands_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Set up and run\n.*?```bash\n(.*?)```", readme, re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make report", "make test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^report:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


# Benchmarks that run against something CI does not have (a GPU, a real endpoint).
_NOT_IN_CI = {"wide_research_live.py"}


def test_ci_runs_every_benchmark_in_its_quick_mode() -> None:
    makefile = (ROOT / "Makefile").read_text()
    target = re.search(r"^bench-quick:.*?\n((?:\t.*\n)+)", makefile, re.M)
    assert target is not None
    recipe = target.group(1)
    run = set(re.findall(r"\$\(call quick,bench/(\w+\.py)", recipe))
    benches = {p.name for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_")}
    assert benches - _NOT_IN_CI <= run, f"not in bench-quick: {sorted(benches - _NOT_IN_CI - run)}"
    assert "bench/llm.py --engine openai" in recipe
    for name in run:
        assert '"--quick"' in (ROOT / "bench" / name).read_text(), name
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.index("make bench-quick") > ci.index("make test")


README_MAX_LINES = 250
"""The README is a front page; everything else lives in the documentation site (docs/)."""


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail to docs/"
    )


def _nav_pages(entries: object) -> list[str]:
    """Every page `mkdocs.yml`'s `nav` names, however deep its sections go."""
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in _nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in _nav_pages(value)]
    return []


def test_every_page_of_the_site_is_in_its_nav_and_every_nav_entry_is_a_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = ROOT / config.get("docs_dir", "docs")
    nav = _nav_pages(config["nav"])
    pages = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md"))
    assert sorted(set(pages) - set(nav)) == [], "pages under docs/ missing from mkdocs.yml nav"
    assert sorted(set(nav) - set(pages)) == [], "nav entries with no page under docs/"
    assert len(nav) == len(set(nav)), "a page is in the nav twice"


def test_the_readme_links_only_to_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(((?!https?://|#)[^)#\s]+)", readme)
    assert links, "the README links into the site"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert missing == [], f"README links to missing files: {missing}"
