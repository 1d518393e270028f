"""deploy/compose.yaml and deploy/kubernetes/, validated offline and held consistent with each other.

The Compose file is checked against the Compose Specification's schema and the Kubernetes objects against
the Kubernetes 1.30 schemas of their kinds (strict: an unknown field fails), both vendored under
tests/deploy/schemas/ (SOURCES.md). Then what the schemas cannot know: one image everywhere, the commands
of the systemd units, probes that ask for paths the Flask app serves, the migration before the API and the
workers, every variable a documented setting, unprivileged pods on a read-only root, the signing key where
it is needed only, and a Secret of placeholders.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import click
import jsonschema
import pytest
import yaml
from deploy_support import (
    DEPLOY,
    KUBERNETES,
    ROOT,
    SCHEMAS,
    compose_file,
    documented_settings,
    kubernetes_manifests,
    project_version,
)
from referencing import Registry, Resource

from service.config import DEFAULTS, ENV_PREFIX

KUBERNETES_SCHEMAS = SCHEMAS / "kubernetes" / "v1.30.0-local-strict"
KIND_SCHEMAS = {("v1", "ConfigMap"): "configmap-v1.json", ("apps/v1", "Deployment"): "deployment-apps-v1.json",
                ("batch/v1", "Job"): "job-batch-v1.json", ("v1", "Secret"): "secret-v1.json",
                ("v1", "Service"): "service-v1.json"}
IMAGE = f"quotecheck:{project_version()}"
API_COMMAND = ["gunicorn", "-c", "/etc/quotecheck/gunicorn.conf.py", "service.wsgi:app"]
WORKER_COMMAND = ["celery", "-A", "workers.worker", "worker"]
WEBHOOK_WORKER_COMMAND = ["celery", "-A", "workers.webhook_worker", "worker"]
MIGRATE_COMMAND = ["quotecheck", "db", "upgrade"]
SECRET_TEMPLATE = "secret.template.yaml"
SETTINGS_CONFIGMAP, ENV_SECRET, SIGNING_SECRET = "quotecheck-settings", "quotecheck-env", "quotecheck-signing"
PLACEHOLDER = "REPLACE_WITH_"
# The pods that sign nothing, and so mount no signing key: the migration and the webhook worker.
SIGNING_NOTHING = ("quotecheck-migrate", "quotecheck-webhooks")
# The variables the image sets besides settings: no bytecode on a read-only root, logs unbuffered, the
# font cache in /tmp.
IMAGE_VARIABLES = {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "XDG_CACHE_HOME"}
HEALTHCHECK_URL = re.compile(r"http://127\.0\.0\.1:(\d+)(/[^'\" ]*)")


# --- reading the files ----------------------------------------------------------------------------------

def dockerfile() -> list[tuple[str, str]]:
    """Returns the instructions of deploy/Dockerfile as (INSTRUCTION, arguments), continuations joined."""
    instructions, pending = [], ""
    for line in (DEPLOY / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        pending += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            instruction, _, arguments = pending.strip().partition(" ")
            instructions.append((instruction.upper(), arguments.strip()))
            pending = ""
    return instructions


def dockerfile_values(instruction: str) -> list[str]:
    return [arguments for name, arguments in dockerfile() if name == instruction]


def dockerfile_environment() -> dict[str, str]:
    return dict(word.split("=", 1) for arguments in dockerfile_values("ENV") for word in shlex.split(arguments))


def image_user() -> tuple[int, int]:
    (user,) = dockerfile_values("USER")
    uid, gid = user.split(":")
    return int(uid), int(gid)


def apt_packages(command: str) -> set[str]:
    """Returns the packages an `apt-get install` in ``command`` names (its options left out)."""
    match = re.search(r"apt-get install ([^&|;]*)", command)
    assert match, command
    return {word for word in match[1].split() if not word.startswith("-")}


def pod_specs() -> dict[str, dict[str, Any]]:
    """Returns the pod spec of every Deployment and Job, by object name."""
    return {obj["metadata"]["name"]: obj["spec"]["template"]["spec"]
            for documents in kubernetes_manifests().values() for obj in documents
            if obj["kind"] in ("Deployment", "Job")}


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec.get("initContainers", []) + spec["containers"]


def objects_of(kind: str) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for documents in kubernetes_manifests().values() for obj in documents
            if obj["kind"] == kind}


def secret_template() -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in kubernetes_manifests()[SECRET_TEMPLATE]}


def configmap_settings() -> dict[str, str]:
    return objects_of("ConfigMap")[SETTINGS_CONFIGMAP]["data"]


def quotecheck_services() -> dict[str, dict[str, Any]]:
    """Returns the Compose services that run the quotecheck image."""
    return {name: service for name, service in compose_file()["services"].items() if service["image"] == IMAGE}


def port_of(bind: str) -> int:
    return int(bind.rsplit(":", 1)[1])


def cpus(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


# --- schemas --------------------------------------------------------------------------------------------

def compose_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / "compose-spec.json").read_text())
    return jsonschema.validators.validator_for(schema)(schema)


def kubernetes_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    definitions = json.loads((KUBERNETES_SCHEMAS / "_definitions.json").read_text())
    registry = Registry().with_resource(definitions["$id"], Resource.from_contents(definitions))
    schema = json.loads((KUBERNETES_SCHEMAS / KIND_SCHEMAS[(api_version, kind)]).read_text())
    return jsonschema.validators.validator_for(schema)(schema, registry=registry)


def errors_of(validator: jsonschema.protocols.Validator, instance: Any) -> list[str]:
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(instance)]


def test_the_compose_file_is_valid_under_the_compose_specification():
    assert errors_of(compose_validator(), compose_file()) == []


@pytest.mark.parametrize("name", sorted(kubernetes_manifests()))
def test_every_kubernetes_object_is_valid_under_the_schema_of_its_kind(name):
    for obj in kubernetes_manifests()[name]:
        assert (obj["apiVersion"], obj["kind"]) in KIND_SCHEMAS, f"{name}: no vendored schema for {obj['kind']}"
        validator = kubernetes_validator(obj["apiVersion"], obj["kind"])
        assert errors_of(validator, obj) == [], f"{name}: {obj['kind']} {obj['metadata']['name']}"


def test_the_schemas_refuse_a_misspelt_field():
    # Given the files as they are, each with one field misspelt
    deployment = objects_of("Deployment")["quotecheck-api"]
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    compose = compose_file()
    compose["services"]["api"]["healthcheck"]["intervall"] = "5s"

    # Then the strict schemas name the field
    assert any("readinessProbes" in error for error in errors_of(kubernetes_validator("apps/v1", "Deployment"),
                                                                  broken))
    assert any("intervall" in error for error in errors_of(compose_validator(), compose))


def test_the_vendored_schemas_are_the_files_sources_md_lists():
    listed = dict(reversed(line.split()) for line in (SCHEMAS / "SOURCES.md").read_text().splitlines()
                  if re.fullmatch(r"[0-9a-f]{64}  \S+", line))
    vendored = {str(path.relative_to(SCHEMAS)): hashlib.sha256(path.read_bytes()).hexdigest()
                for path in sorted(SCHEMAS.rglob("*.json"))}

    assert listed == vendored


# --- the kustomization ------------------------------------------------------------------------------------

def test_the_kustomization_applies_every_manifest_but_the_secret_template():
    (kustomization,) = yaml.safe_load_all((KUBERNETES / "kustomization.yaml").read_text())

    assert sorted(kustomization["resources"]) == sorted(set(kubernetes_manifests()) - {SECRET_TEMPLATE})


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_builds_the_objects_of_the_manifests():
    built = subprocess.run(["kubectl", "kustomize", str(KUBERNETES)], capture_output=True, text=True, timeout=60)

    assert built.returncode == 0, built.stderr
    objects = [(o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(built.stdout) if o]
    expected = [(o["kind"], o["metadata"]["name"]) for name, documents in kubernetes_manifests().items()
                if name != SECRET_TEMPLATE for o in documents]
    assert sorted(objects) == sorted(expected)


# --- one image, the commands of the systemd units ----------------------------------------------------------

def test_one_image_everywhere_tagged_with_the_project_version():
    compose = compose_file()["services"]

    assert {"api", "worker", "webhooks", "migrate"} <= set(quotecheck_services())
    assert {name for name, s in compose.items() if "quotecheck" in s["image"]} == set(quotecheck_services())
    assert {c["image"] for spec in pod_specs().values() for c in containers(spec)} == {IMAGE}
    for service in quotecheck_services().values():
        assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).resolve() == \
            DEPLOY / "Dockerfile"
    assert f"-t {IMAGE}" in (DEPLOY / "Dockerfile").read_text()


def test_the_api_worker_and_migration_run_the_commands_of_the_systemd_units():
    api_unit = (DEPLOY / "quotecheck-api.service").read_text()
    worker_unit = (DEPLOY / "quotecheck-worker.service").read_text()
    services, specs = quotecheck_services(), pod_specs()

    assert "gunicorn -c deploy/gunicorn.conf.py service.wsgi:app" in api_unit
    assert json.loads(dockerfile_values("CMD")[0]) == API_COMMAND
    assert f"deploy/gunicorn.conf.py {API_COMMAND[2]}" in dockerfile_values("COPY")
    assert services["api"]["command"] == specs["quotecheck-api"]["containers"][0]["command"] == API_COMMAND

    assert "celery -A workers.worker worker" in worker_unit
    for command in (services["worker"]["command"], specs["quotecheck-worker"]["containers"][0]["command"]):
        assert command[:4] == WORKER_COMMAND and "--hostname=quotecheck@%h" in command

    webhooks_unit = (DEPLOY / "quotecheck-webhooks.service").read_text()
    assert "celery -A workers.webhook_worker worker" in webhooks_unit
    for command in (services["webhooks"]["command"], specs["quotecheck-webhooks"]["containers"][0]["command"]):
        assert command[:4] == WEBHOOK_WORKER_COMMAND and "--hostname=webhooks@%h" in command

    assert "quotecheck db upgrade" in api_unit
    assert services["migrate"]["command"] == specs["quotecheck-migrate"]["containers"][0]["command"] == \
        MIGRATE_COMMAND
    # what the commands load exists (without running create_app from the environment)
    assert importlib.util.find_spec("service.wsgi") and importlib.util.find_spec("workers.worker")
    assert importlib.util.find_spec("workers.webhook_worker")


def test_exactly_one_webhook_worker_runs_beside_the_workers_and_it_runs_beat():
    # Deliveries have a queue of their own (docs/workers.md, "Webhooks"): the webhook worker consumes it, and
    # Celery beat (-B, which sends the retries) runs in that one worker and nowhere else.
    unit = " ".join((DEPLOY / "quotecheck-webhooks.service").read_text().replace("\\\n", " ").split())
    commands = {"systemd": unit.split("ExecStart=", 1)[1].split(" KillSignal")[0],
                "compose": " ".join(quotecheck_services()["webhooks"]["command"]),
                "kubernetes": " ".join(pod_specs()["quotecheck-webhooks"]["containers"][0]["command"])}
    deployment = objects_of("Deployment")["quotecheck-webhooks"]["spec"]

    for where, command in commands.items():
        assert " -B " in f"{command} " and "--schedule=/tmp/" in command, where
        assert "-Q" not in command.split(), where  # the module picks the queue from the settings
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}
    assert quotecheck_services()["webhooks"].get("deploy", {}).get("replicas", 1) == 1
    others = [" ".join(quotecheck_services()["worker"]["command"]),
              " ".join(pod_specs()["quotecheck-worker"]["containers"][0]["command"]),
              (DEPLOY / "quotecheck-worker.service").read_text()]
    assert not any(" -B" in command or " beat" in command for command in others)


def test_the_image_installs_the_package_and_the_pdf_renderers_libraries():
    (base,) = dockerfile_values("FROM")
    (install,) = [run for run in dockerfile_values("RUN") if "apt-get install" in run]
    readme_install = next(line for line in (DEPLOY / "README.md").read_text().splitlines()
                          if "apt-get install" in line)

    assert base == "python:3.11-slim"
    assert {"libpango-1.0-0", "libpangoft2-1.0-0", "libharfbuzz-subset0"} <= apt_packages(install)
    assert any(package.startswith("fonts-") for package in apt_packages(install))
    assert apt_packages(install) == apt_packages(readme_install)
    assert any("pip install" in run and "'.[postgres]'" in run for run in dockerfile_values("RUN"))


# --- the migration first ----------------------------------------------------------------------------------

def test_compose_starts_the_api_and_workers_after_the_migration_succeeded():
    services = compose_file()["services"]

    for name in ("api", "worker", "webhooks"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert services["migrate"]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    assert services["migrate"]["restart"] == "no"
    waited_for = {target for s in services.values() for target, c in s.get("depends_on", {}).items()
                  if c["condition"] == "service_healthy"}
    assert all("healthcheck" in services[target] for target in waited_for)


def wait_for_migration_program() -> str:
    """Returns the awk program with which the init containers decide that the schema is at head."""
    commands = {tuple(c["command"]) for spec in pod_specs().values()
                for c in spec.get("initContainers", []) if c["name"] == "wait-for-migration"}
    (command,) = commands
    assert command[:2] == ("sh", "-c") and "quotecheck db current |" in command[2]
    return re.search(r"awk '([^']*)'", command[2])[1]


def test_api_and_worker_pods_wait_for_the_migration():
    specs = pod_specs()

    for name in ("quotecheck-api", "quotecheck-worker", "quotecheck-webhooks"):
        assert [c["name"] for c in specs[name]["initContainers"]] == ["wait-for-migration"]
    assert wait_for_migration_program()


def test_the_wait_ends_only_when_the_database_is_at_the_newest_migration(app):
    from click.testing import CliRunner

    from service.cli import main
    from service.persistence.db import get_db, upgrade

    def waits_on(output: str) -> bool:
        done = subprocess.run(["awk", wait_for_migration_program()], input=output, capture_output=True, text=True,
                              timeout=10)
        return done.returncode != 0

    def db_current() -> str:
        result = CliRunner().invoke(main, ["db", "current"], obj={"app": app})
        assert result.exit_code == 0, result.output
        return result.output

    assert waits_on("")  # `quotecheck db current` failed: the database does not answer
    assert waits_on(db_current())  # "current: none   head: …"
    upgrade(get_db(app).engine)
    assert not waits_on(db_current())


# --- probes and ports ------------------------------------------------------------------------------------

def probe_paths() -> set[str]:
    """Returns every path that a Kubernetes probe or a Compose healthcheck asks for."""
    probes = [c[kind] for spec in pod_specs().values() for c in spec["containers"]
              for kind in ("startupProbe", "livenessProbe", "readinessProbe") if kind in c]
    paths = {probe["httpGet"]["path"] for probe in probes if "httpGet" in probe}
    for service in quotecheck_services().values():
        test = " ".join(service.get("healthcheck", {}).get("test", []))
        paths |= {path for _, path in HEALTHCHECK_URL.findall(test)}
    return paths


def test_probes_ask_for_paths_the_app_serves_without_a_token(app):
    served = {rule.rule for rule in app.url_map.iter_rules() if "GET" in rule.methods}
    client = app.test_client()

    # The Kubernetes readiness probe leaves the workers to monitoring (/readyz?exclude=workers).
    assert {path.split("?")[0] for path in probe_paths()} == {"/healthz", "/readyz"}
    for path in probe_paths():
        assert path.split("?")[0] in served
        assert client.get(path).status_code == 200, path


def worker_health_checks() -> dict[str, list[list[str]]]:
    """Returns the commands of the worker's Compose healthcheck and Kubernetes liveness probe, by file, each as
    the argument lists its shell runs one after the other (``&&``)."""
    compose_test = quotecheck_services()["worker"]["healthcheck"]["test"]
    (worker,) = pod_specs()["quotecheck-worker"]["containers"]
    probe = worker["livenessProbe"]["exec"]["command"]
    assert compose_test[0] == "CMD-SHELL" and probe[:2] == ["sh", "-c"]
    return {file: [shlex.split(part) for part in script.split("&&")]
            for file, script in (("compose.yaml", compose_test[1].replace("$$", "$")),
                                 ("worker-deployment.yaml", probe[2]))}


def test_the_worker_health_checks_ping_the_worker_and_fail_when_queued_work_ages():
    from service.cli import main

    time_limit_s = float(configmap_settings().get("QUOTECHECK_CELERY_TASK_TIME_LIMIT_S",
                                                  DEFAULTS["CELERY_TASK_TIME_LIMIT_S"]))
    for file, (ping, health) in worker_health_checks().items():
        # this worker answers a ping, then the task table shows the workers consume the queue (/readyz's check)
        assert ping[:5] == ["celery", "-A", "workers.worker", "inspect", "ping"], file
        assert ping[ping.index("--destination") + 1] == "quotecheck@$HOSTNAME", file
        assert health[:3] == ["quotecheck", "worker", "health"], file
        with click.Context(main) as context:
            command = main.get_command(context, "worker").get_command(context, "health")
            max_age_s = command.make_context("health", health[3:]).params["max_queued_age_s"]
        # a worker busy with tasks ends one within the hard time limit, so only a stuck one fails this long
        assert max_age_s > time_limit_s, file


def test_the_probes_and_the_service_reach_the_port_gunicorn_binds():
    bind_port = port_of(configmap_settings()["QUOTECHECK_BIND"])
    (api,) = pod_specs()["quotecheck-api"]["containers"]
    (service,) = objects_of("Service").values()

    assert api["ports"] == [{"name": "http", "containerPort": bind_port}]
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert api[kind]["httpGet"]["port"] == "http"
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    assert service["spec"]["selector"] == objects_of("Deployment")["quotecheck-api"]["spec"]["selector"]["matchLabels"]

    compose_api = quotecheck_services()["api"]
    compose_port = port_of(compose_api["environment"]["QUOTECHECK_BIND"])
    assert {int(port) for port, _ in HEALTHCHECK_URL.findall(" ".join(compose_api["healthcheck"]["test"]))} == \
        {compose_port}
    assert [p.rsplit(":", 1)[1] for p in compose_api["ports"]] == [str(compose_port)]
    assert port_of(dockerfile_environment()["QUOTECHECK_BIND"]) == compose_port


def test_gunicorn_and_celery_start_as_many_processes_as_the_cpu_limit_allows():
    specs = pod_specs()
    (api,), (worker,) = specs["quotecheck-api"]["containers"], specs["quotecheck-worker"]["containers"]
    (webhooks,) = specs["quotecheck-webhooks"]["containers"]

    assert int(configmap_settings()["QUOTECHECK_WORKERS"]) == cpus(api["resources"]["limits"]["cpu"]) + 1
    assert f"--concurrency={cpus(worker['resources']['limits']['cpu']):.0f}" in worker["command"]
    assert f"--concurrency={cpus(webhooks['resources']['limits']['cpu']):.0f}" in webhooks["command"]


# --- settings ----------------------------------------------------------------------------------------------

def test_every_variable_the_deployment_sets_is_a_documented_setting():
    documented = documented_settings().settings
    templates = secret_template()
    specs = pod_specs()
    compose = compose_file()

    variables = {
        "ConfigMap": set(configmap_settings()),
        "Secret quotecheck-env": set(templates[ENV_SECRET]["stringData"]),
        "container env": {v["name"] for spec in specs.values() for c in containers(spec) for v in c.get("env", [])},
        "compose": {name for s in quotecheck_services().values() for name in s["environment"]}
        | set(compose["x-environment"]),
        "Dockerfile": set(dockerfile_environment()) - IMAGE_VARIABLES,
    }

    assert {where: names - set(documented) for where, names in variables.items()} == {w: set() for w in variables}
    assert all(name.startswith(f"{ENV_PREFIX}_") for names in variables.values() for name in names)


def test_pods_read_settings_from_the_configmap_and_the_secret_the_files_define():
    for spec in pod_specs().values():
        for container in containers(spec):
            sources = [next(iter(source.values()))["name"] for source in container["envFrom"]]
            assert sources == [SETTINGS_CONFIGMAP, ENV_SECRET], container["name"]
    assert set(objects_of("ConfigMap")) == {SETTINGS_CONFIGMAP}
    assert set(secret_template()) == {ENV_SECRET, SIGNING_SECRET}


def test_nothing_needs_the_instance_folder_on_a_read_only_root():
    # Without a DATABASE_URL the app writes a SQLite file, without key files it generates a key: both in the
    # instance folder, which is read-only in the pods and the compose containers.
    kubernetes = configmap_settings() | secret_template()[ENV_SECRET]["stringData"]
    compose = compose_file()["x-environment"]

    for settings in (kubernetes, compose):
        assert {"QUOTECHECK_DATABASE_URL", "QUOTECHECK_SIGNING_CERT_FILE", "QUOTECHECK_SIGNING_KEY_FILE"} <= \
            set(settings)
        assert settings["QUOTECHECK_AUTO_MIGRATE"] == "false"
    # With a broker the webhooks' secrets are encrypted with a configured key, never one of the instance folder:
    # the Secret and the env file (which Compose reads) ask for one of the operator's own.
    assert PLACEHOLDER in secret_template()[ENV_SECRET]["stringData"]["QUOTECHECK_WEBHOOK_SECRET_KEY"]
    assert any(line.startswith(f"QUOTECHECK_WEBHOOK_SECRET_KEY={PLACEHOLDER}")
               for line in (DEPLOY / "quotecheck.env.example").read_text().splitlines())


# --- security ----------------------------------------------------------------------------------------------

def test_pods_run_unprivileged_on_a_read_only_root_within_limits():
    uid, gid = image_user()

    for name, spec in pod_specs().items():
        assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False, name
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and (pod["runAsUser"], pod["runAsGroup"]) == (uid, gid), name
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, name
        empty_dirs = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
        for container in containers(spec):
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            resources = container["resources"]
            assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}, container["name"]
            tmp = [m["name"] for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert tmp and tmp[0] in empty_dirs, container["name"]
    assert dockerfile_environment()["XDG_CACHE_HOME"].startswith("/tmp/")


def test_compose_runs_quotecheck_unprivileged_on_a_read_only_root():
    uid, gid = image_user()

    for name, service in quotecheck_services().items():
        assert service["user"] == f"{uid}:{gid}" and service["read_only"] is True, name
        assert "/tmp" in service["tmpfs"], name
        assert service["env_file"] == "quotecheck.env", name


def test_the_signing_key_reaches_the_api_and_the_workers_only():
    # The webhook worker signs nothing (it sends deliveries only): it gets no signing key, as the migration.
    settings = configmap_settings()
    key_file, cert_file = settings["QUOTECHECK_SIGNING_KEY_FILE"], settings["QUOTECHECK_SIGNING_CERT_FILE"]
    signing_keys = set(secret_template()[SIGNING_SECRET]["stringData"])

    for name, spec in pod_specs().items():
        signing = [v["name"] for v in spec["volumes"] if v.get("secret", {}).get("secretName") == SIGNING_SECRET]
        for container in containers(spec):
            mounts = [m for m in container.get("volumeMounts", []) if m["name"] in signing]
            if name in SIGNING_NOTHING or container in spec.get("initContainers", []):
                assert not mounts, container["name"]
                assert {"name": "QUOTECHECK_SIGNING_KEYS_AT_START", "value": "false"} in container["env"]
            else:
                (mount,) = mounts
                assert mount["readOnly"] is True
                assert posixpath.dirname(key_file) == posixpath.dirname(cert_file) == mount["mountPath"]
                assert {posixpath.basename(key_file), posixpath.basename(cert_file)} == signing_keys
        for volume in spec["volumes"]:
            if volume["name"] in signing:
                assert volume["secret"]["defaultMode"] == 0o440

    compose = compose_file()
    for name, service in quotecheck_services().items():
        environment = service["environment"]
        if name in ("migrate", "webhooks"):
            assert "secrets" not in service and environment["QUOTECHECK_SIGNING_KEYS_AT_START"] == "false"
        else:
            assert sorted(service["secrets"]) == ["signing_cert", "signing_key"]
            assert environment["QUOTECHECK_SIGNING_KEY_FILE"] == "/run/secrets/signing_key"
            assert environment["QUOTECHECK_SIGNING_CERT_FILE"] == "/run/secrets/signing_cert"
    assert set(compose["secrets"]) == {"signing_cert", "signing_key"}
    assert all(secret["file"].startswith("./secrets/") for secret in compose["secrets"].values())


def test_the_secret_template_holds_placeholders_only():
    for name, secret in secret_template().items():
        assert "data" not in secret, name
        for key, value in secret["stringData"].items():
            assert PLACEHOLDER in value and "-----BEGIN" not in value, f"{name}/{key}"


def test_local_secrets_and_settings_stay_out_of_git():
    ignored = subprocess.run(["git", "check-ignore", "deploy/.env", "deploy/quotecheck.env", "deploy/secrets/key.pem"],
                             cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert sorted(ignored.stdout.split()) == ["deploy/.env", "deploy/quotecheck.env", "deploy/secrets/key.pem"]
    dockerignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert {"deploy/.env", "deploy/quotecheck.env", "deploy/secrets", ".git"} <= set(dockerignore)


# --- the app the probes ask -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    """An app on a fresh, unmigrated SQLite file, configured by the test alone (the environment cleared)."""
    from service import create_app

    folder: Path = tmp_path_factory.mktemp("deploy-app")
    with pytest.MonkeyPatch.context() as patch:
        for name in [name for name in os.environ if name.startswith(f"{ENV_PREFIX}_")]:
            patch.delenv(name)
        yield create_app({"INSTANCE_PATH": str(folder), "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}",
                          "AUTO_MIGRATE": False, "SIGNING_KEYS_AT_START": False})
