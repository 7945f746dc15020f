"""deploy/z2jh/, checked offline (issue 37, part 3): the Zero to JupyterHub values, ngshare's values,
the grader's manifests and the Python they carry. No cluster, no helm: seconds.

- yamllint (PyPI) on every YAML file there;
- each values file against its JSON schema beside it, strict (an unknown or misspelt key fails; the
  schemas are checked to be strict at every level, and a misspelt key is shown to fail);
- kubernetes-validate (PyPI) on the raw manifests (grader-service.yaml), strict, for the oldest
  Kubernetes the jupyterhub chart supports and the newest kubernetes-validate knows;
- the hub's extraConfig snippets and the nbgrader configurations compile (and the groups snippet runs);
- the two charts agree: ngshare's Service name, port and token, the hub service's name in the exchange
  URL the students and the grader use, the hub API ngshare calls; and the grader's manifests agree with
  the hub service they run (name, URL, the token's Secret key).
tests/course/test_ngshare_exchange.py runs the exchange itself.
"""

from __future__ import annotations

import copy
import json
from urllib.parse import urlparse

import pytest
import yaml

from tests.conftest import ROOT

Z2JH = ROOT / "deploy" / "z2jh"
SERVICE = "attention-transformers"  # the grader service: the hub service and ngshare's admin
KUBERNETES = ("1.32.0",)  # the jupyterhub chart's kubeVersion: >=1.32.0 (plus kubernetes-validate's newest)


def _load(name: str):
    return yaml.safe_load((Z2JH / name).read_text())


def _manifests() -> list[dict]:
    return [doc for doc in yaml.safe_load_all((Z2JH / "grader-service.yaml").read_text()) if doc]


def _env(container: dict) -> dict[str, object]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.fixture(scope="module")
def hub_values():
    return _load("config.yaml")


@pytest.fixture(scope="module")
def ngshare_values():
    return _load("ngshare-values.yaml")


def test_yamllint():
    linter = pytest.importorskip("yamllint.linter", reason="yamllint (PyPI) is not installed: pip install -e .[dev]")
    from yamllint.config import YamlLintConfig

    config = YamlLintConfig("extends: default\nrules:\n  line-length: {max: 130}\n  document-start: disable\n"
                            "  comments: {min-spaces-from-content: 1}\n  braces: {max-spaces-inside: 1}\n")
    files = sorted(Z2JH.glob("*.yaml"))
    assert len(files) >= 3, files
    problems = [f"{path.name}:{p.line}: {p.desc} ({p.rule})" for path in files
                for p in linter.run(path.read_text(), config, str(path)) if p.level == "error"]
    assert not problems, "\n".join(problems)


def _strict_everywhere(schema, where="") -> list[str]:
    """Object schemas that let an unknown key through (no additionalProperties: False or a schema)."""
    loose = []
    if isinstance(schema, dict):
        if schema.get("type") == "object" and schema.get("additionalProperties", True) is True:
            loose.append(where or "/")
        for key, value in schema.items():
            loose += _strict_everywhere(value, f"{where}/{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            loose += _strict_everywhere(value, f"{where}/{i}")
    return loose


@pytest.mark.parametrize("values, schema, misspelt", [
    ("config.yaml", "values.schema.json", ("singleuser", "profileList", 0, "kubespawner_override", "mem_limt")),
    ("ngshare-values.yaml", "ngshare-values.schema.json", ("ngshare", "hub_api_tokn")),
])
def test_values_match_their_strict_schema(values, schema, misspelt):
    import jsonschema

    schema = json.loads((Z2JH / schema).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert not _strict_everywhere(schema), f"loose objects in the schema: {_strict_everywhere(schema)}"
    validator = jsonschema.Draft202012Validator(schema)
    data = _load(values)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]
    assert not errors, "\n".join(errors)
    # a misspelt key (deep down) fails, and so does one at the top
    for path in (misspelt, ("hubb",)):
        wrong = copy.deepcopy(data)
        node = wrong
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = "x"
        assert not validator.is_valid(wrong), f"{values}: {'.'.join(map(str, path))} is accepted"


@pytest.mark.parametrize("version", [*KUBERNETES, "latest"])
def test_manifests_validate(version):
    kubernetes_validate = pytest.importorskip("kubernetes_validate",
                                              reason="kubernetes-validate (PyPI) is not installed: pip install -e .[dev]")
    version = kubernetes_validate.latest_version() if version == "latest" else version
    manifests = _manifests()
    assert {m["kind"] for m in manifests} == {"PersistentVolumeClaim", "Deployment", "Service", "NetworkPolicy"}
    for manifest in manifests:
        kubernetes_validate.validate(manifest, version, strict=True)  # raises on an error
    broken = copy.deepcopy(next(m for m in manifests if m["kind"] == "Deployment"))
    broken["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, version, strict=True)


def _python_snippets(hub_values) -> dict[str, str]:
    snippets = {f"hub.extraConfig.{name}": code for name, code in hub_values["hub"]["extraConfig"].items()}
    snippets.update({f"singleuser.extraFiles.{name}": f["stringData"]
                     for name, f in hub_values["singleuser"]["extraFiles"].items() if f["mountPath"].endswith(".py")})
    snippets["nbgrader_config.py"] = (Z2JH / "nbgrader_config.py").read_text()
    return snippets


def test_python_snippets_compile_and_groups_load(hub_values):
    snippets = _python_snippets(hub_values)
    assert len(snippets) >= 3, sorted(snippets)
    for name, code in snippets.items():
        compile(code, name, "exec")  # a SyntaxError names the snippet
    from traitlets.config import Config

    c = Config()
    exec(compile(hub_values["hub"]["extraConfig"]["course-groups.py"], "course-groups.py", "exec"), {"c": c})
    groups = c.JupyterHub.load_groups
    # the role config.yaml gives the group that snippet fills
    role = hub_values["hub"]["loadRoles"][f"formgrade-{SERVICE}"]
    assert role["groups"] == [f"formgrade-{SERVICE}"] and f"formgrade-{SERVICE}" in groups, groups
    assert role["scopes"] == [f"access:services!service={SERVICE}"] and SERVICE in hub_values["hub"]["services"]
    assert groups[f"formgrade-{SERVICE}"]["users"] == [hub_values["hub"]["extraEnv"]["COURSE_INSTRUCTORS"]]


def test_ngshare_url_and_token_agree(hub_values, ngshare_values):
    services = hub_values["hub"]["services"]
    (name,) = [key for key, s in services.items() if urlparse(s["url"]).hostname == ngshare_values["fullnameOverride"]]
    service = services[name]
    # the hub reaches ngshare's Service: its name and port
    url = urlparse(service["url"])
    assert (url.hostname, url.port) == (ngshare_values["fullnameOverride"], ngshare_values["deployment"]["port"]), url
    # one token, in both
    assert service["api_token"] == ngshare_values["ngshare"]["hub_api_token"]
    # ngshare serves under /services/<its chart's name>/ and is the hub's OAuth client service-<name>:
    # the hub service's key must be that name (the chart's, unless nameOverride says otherwise)
    assert name == ngshare_values.get("nameOverride") or name == "ngshare"
    assert ngshare_values["ngshare"]["oauth_client_id"] == f"service-{name}"
    # ngshare asks the hub who a token is: Z2JH's `hub` Service, port 8081
    hub_api = urlparse(ngshare_values["ngshare"]["hub_api_url"])
    assert (hub_api.hostname, hub_api.port, hub_api.path) == ("hub", 8081, "/hub/api"), hub_api
    # students and the grader reach it through the hub's proxy, under the service's prefix
    grader = next(m for m in _manifests() if m["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    exchange_urls = {hub_values["singleuser"]["extraEnv"]["NGSHARE_URL"], _env(grader)["NGSHARE_URL"]}
    assert exchange_urls == {f"http://proxy-public/services/{name}"}, exchange_urls
    for code in (hub_values["singleuser"]["extraFiles"]["nbgrader-config"]["stringData"],
                 (Z2JH / "nbgrader_config.py").read_text()):
        assert f'"http://proxy-public/services/{name}"' in code and "configureExchange(" in code
    # the grader service administers the course in ngshare
    assert SERVICE in ngshare_values["ngshare"]["admins"]


def test_grader_service_matches_the_hub(hub_values):
    service = hub_values["hub"]["services"][SERVICE]
    manifests = {m["kind"]: m for m in _manifests()}
    url = urlparse(service["url"])
    svc = manifests["Service"]
    assert (url.hostname, url.port) == (svc["metadata"]["name"], svc["spec"]["ports"][0]["port"]), url
    pod = manifests["Deployment"]["spec"]["template"]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert pod["metadata"]["labels"]["hub.jupyter.org/network-access-hub"] == "true"
    env = _env(pod["spec"]["containers"][0])
    assert env["JUPYTERHUB_SERVICE_NAME"] == SERVICE and env["JUPYTERHUB_CLIENT_ID"] == f"service-{SERVICE}"
    assert env["JUPYTERHUB_SERVICE_PREFIX"] == f"/services/{SERVICE}/"
    # the token the jupyterhub chart generated for this service (no api_token in the values)
    assert "api_token" not in service and "apiToken" not in service
    assert env["JUPYTERHUB_API_TOKEN"] == {"secretKeyRef": {"name": "hub", "key": f"hub.services.{SERVICE}.apiToken"}}
    claim = pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert claim == manifests["PersistentVolumeClaim"]["metadata"]["name"]
    # the Dask cluster of deploy/dask: the scheduler's Service, and the cluster the network policy opens
    dask = yaml.safe_load_all((ROOT / "deploy" / "dask" / "kubernetes" / "daskcluster.yaml").read_text())
    cluster = next(d for d in dask if d and d["kind"] == "DaskCluster")["metadata"]
    scheduler = urlparse(env["COURSE_DASK_SCHEDULER"])
    assert scheduler.hostname == f"{cluster['name']}-scheduler.{cluster['namespace']}.svc.cluster.local"
    policy = manifests["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"] == {"dask.org/cluster-name": cluster["name"]}
    assert policy["ingress"][0]["from"][0]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()


def test_profiles(hub_values):
    profiles = {p["slug"]: p["kubespawner_override"] for p in hub_values["singleuser"]["profileList"]}
    assert set(profiles) == {"cpu", "gpu"}
    assert [p["slug"] for p in hub_values["singleuser"]["profileList"] if p.get("default")] == ["cpu"]
    assert profiles["gpu"]["extra_resource_limits"] == {"nvidia.com/gpu": "1"}
    assert {slug: p["environment"]["COURSE_PROFILE"] for slug, p in profiles.items()} == {"cpu": "cpu", "gpu": "gpu"}
    assert hub_values["cull"]["enabled"] and hub_values["singleuser"]["storage"]["type"] == "dynamic"


def test_dockerfile_targets_and_readme():
    dockerfile = (Z2JH / "Dockerfile").read_text()
    assert "AS student" in dockerfile and "AS grader" in dockerfile and "ngshare_exchange" in dockerfile
    readme = (Z2JH / "README.md").read_text()
    for name in ("config.yaml", "ngshare-values.yaml", "grader-service.yaml", "nbgrader_config.py", "Dockerfile",
                 "--scheduler", "deploy/dask"):
        assert name in readme, name
