"""Checks of the rendered Kubernetes manifests beyond their schema (which
kubernetes-validate checks): Rebound runs as a native sidecar the way the image
expects, and the component adds exactly the base's sidecar to a workload
without touching what the workload had.

    python3 manifests.py sidecar REPO_ROOT BASE.yaml COMPONENT.yaml EXISTING_APP_SOURCE.yaml
    python3 manifests.py launch REPO_ROOT BASE.yaml REBOUND_BIN CONFIG_DIR
"""

import os
import re
import sys
import tomllib
from pathlib import Path

from common import load_yaml, load_yaml_documents, require, run
from image import DOCKERFILE, exec_form, stages

#: A port name: an IANA service name, at most 15 characters.
PORT_NAME = re.compile(r"^(?=.{1,15}$)(?=.*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def deployments(docs):
    """The Deployments of a rendered kustomize output."""
    return [d for d in docs if d["kind"] == "Deployment"]


def config_maps(docs):
    """The rendered ConfigMaps by name."""
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}


def flag_values(args):
    """--name=value and --name value pairs of a container's args."""
    values, i = {}, 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
            values[name] = value
        elif arg.startswith("--") and i + 1 < len(args):
            values[arg] = args[i + 1]
            i += 1
        i += 1
    return values


def sidecar_of(deployment):
    """The rebound init container of a Deployment's pod template."""
    spec = deployment["spec"]["template"]["spec"]
    name = deployment["metadata"]["name"]
    found = [c for c in spec.get("initContainers", []) if c["name"] == "rebound"]
    require(len(found) == 1, f"{name}: expected one init container named rebound, found {len(found)}")
    require(not any(c["name"] == "rebound" for c in spec.get("containers", [])),
            f"{name}: rebound must be a native sidecar (an init container), not a regular container")
    return found[0]


def image_user(root):
    """The numeric uid the image runs as."""
    runtime = stages(Path(root) / DOCKERFILE)[0][-1]
    return int([r for k, r in runtime["body"] if k == "USER"][-1].split(":")[0])


def check_pod(root, deployment, docs):
    """One Deployment runs Rebound as a native sidecar with probes, limits, a locked-down
    security context, named ports that match its flags, and its config mounted."""
    name = deployment["metadata"]["name"]
    spec = deployment["spec"]["template"]["spec"]
    c = sidecar_of(deployment)
    version = tomllib.loads((Path(root) / "Cargo.toml").read_text(encoding="utf-8"))["package"]["version"]

    require(c.get("restartPolicy") == "Always",
            f"{name}: the rebound init container needs restartPolicy: Always to be a native sidecar")
    require(c["image"].rsplit(":", 1)[-1] == version,
            f"{name}: image {c['image']} is not tagged with Cargo.toml's version {version}")
    require("command" not in c, f"{name}: command would replace the image's ENTRYPOINT (rebound serve)")
    flags = flag_values(c.get("args", []))
    require(all(a.startswith("--") for a in c.get("args", [])),
            f"{name}: args are appended to `rebound serve`: only flags belong there, found {c.get('args')}")

    ports = {p["name"]: p for p in c.get("ports", [])}
    require(set(ports) == {"grpc", "metrics"}, f"{name}: rebound needs the named ports grpc and metrics")
    all_port_names = [p["name"] for k in ("initContainers", "containers") for x in spec.get(k, [])
                      for p in x.get("ports", []) if "name" in p]
    for port_name in all_port_names:
        require(PORT_NAME.match(port_name), f"{name}: port name {port_name!r} is not a valid IANA service name")
    listen = flags.get("--listen", "")
    metrics_listen = flags.get("--metrics-listen", "")
    require(listen == f"0.0.0.0:{ports['grpc']['containerPort']}",
            f"{name}: --listen {listen!r} must be 0.0.0.0 on the grpc port {ports['grpc']['containerPort']}")
    require(metrics_listen == f"0.0.0.0:{ports['metrics']['containerPort']}",
            f"{name}: --metrics-listen {metrics_listen!r} must be 0.0.0.0 on the metrics port")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        require(probe in c and "grpc" in c[probe], f"{name}: rebound needs a gRPC {probe}")
        require(c[probe]["grpc"]["port"] == ports["grpc"]["containerPort"],
                f"{name}: {probe} must probe the grpc port {ports['grpc']['containerPort']}")
    require(c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 10,
            f"{name}: the startup probe gives Rebound less than 10 s to start")

    resources = c.get("resources", {})
    for kind in ("requests", "limits"):
        require({"cpu", "memory"} <= set(resources.get(kind, {})), f"{name}: rebound needs {kind} for cpu and memory")

    sc = c.get("securityContext", {})
    pod_sc = spec.get("securityContext", {})
    require(sc.get("runAsNonRoot") is True or pod_sc.get("runAsNonRoot") is True, f"{name}: runAsNonRoot")
    require(sc.get("runAsNonRoot", True) is True, f"{name}: the container must not override runAsNonRoot")
    require(sc.get("readOnlyRootFilesystem") is True, f"{name}: readOnlyRootFilesystem")
    require(sc.get("allowPrivilegeEscalation") is False, f"{name}: allowPrivilegeEscalation: false")
    require(sc.get("capabilities", {}).get("drop") == ["ALL"] and not sc.get("capabilities", {}).get("add"),
            f"{name}: capabilities must drop ALL and add none")
    require(sc.get("privileged", False) is False, f"{name}: not privileged")
    seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {}))
    require(seccomp.get("type") == "RuntimeDefault", f"{name}: seccompProfile RuntimeDefault")
    uid = image_user(root)
    require(sc.get("runAsUser", uid) == uid, f"{name}: runAsUser {sc.get('runAsUser')} differs from the image's USER {uid}")

    config = flags.get("--config", "")
    mounts = [m for m in c.get("volumeMounts", []) if config.startswith(m["mountPath"].rstrip("/") + "/")]
    require(config and len(mounts) == 1, f"{name}: --config {config!r} is not inside one of rebound's mounts")
    mount = mounts[0]
    require("subPath" not in mount, f"{name}: a subPath mount never sees ConfigMap updates; mount the directory")
    require(mount.get("readOnly") is True, f"{name}: mount the config read-only")
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    require(mount["name"] in volumes and "configMap" in volumes[mount["name"]],
            f"{name}: the config mount {mount['name']} is not a ConfigMap volume")
    cm_name = volumes[mount["name"]]["configMap"]["name"]
    key = config[len(mount["mountPath"].rstrip("/")) + 1:]
    cms = config_maps(docs)
    require(cm_name in cms, f"{name}: ConfigMap {cm_name} is not in the rendered output")
    require(key in cms[cm_name].get("data", {}), f"{name}: ConfigMap {cm_name} has no key {key}")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    require(grace >= 15, f"{name}: terminationGracePeriodSeconds {grace} is below Rebound's 12 s shutdown")
    print(f"{name}: native sidecar, gRPC probes on {ports['grpc']['containerPort']}, "
          f"metrics on {ports['metrics']['containerPort']}, uid {uid}, config {config} from ConfigMap {cm_name}")
    return c


def check_sidecar(root, base_path, component_path, existing_source_path):
    """Both rendered outputs run the sidecar correctly, the component adds exactly the base's
    sidecar and config volume, and the existing workload keeps everything it had."""
    base_docs = load_yaml_documents(base_path)
    comp_docs = load_yaml_documents(component_path)
    require(deployments(base_docs) and deployments(comp_docs), "a rendered output has no Deployment")
    sidecars = [check_pod(root, d, base_docs) for d in deployments(base_docs)]
    sidecars += [check_pod(root, d, comp_docs) for d in deployments(comp_docs)]
    require(all(s == sidecars[0] for s in sidecars),
            "the component's rebound container differs from the base's: keep "
            "components/sidecar/sidecar.yaml and base/deployment.yaml in step")

    def config_volume(deployment):
        return [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "rebound-config"]

    require(config_volume(deployments(base_docs)[0]) == config_volume(deployments(comp_docs)[0]),
            "the component's rebound-config volume differs from the base's")

    source = load_yaml(existing_source_path)
    rendered = next(d for d in deployments(comp_docs) if d["metadata"]["name"] == source["metadata"]["name"])
    before, after = source["spec"]["template"]["spec"], rendered["spec"]["template"]["spec"]
    for key in ("initContainers", "volumes"):
        kept = [x for x in after.get(key, []) if not x["name"].startswith("rebound")]
        require(kept == before.get(key, []), f"the component changed the workload's own {key}")
    # First of the init containers, so that it is serving before the workload's own ones run.
    require(after["initContainers"][0]["name"] == "rebound",
            f"the sidecar is not the first init container: {[c['name'] for c in after['initContainers']]}")
    for key in set(before) | set(after):
        if key not in ("initContainers", "volumes"):
            require(before.get(key) == after.get(key), f"the component changed the workload's {key}")
    print("component: adds the base's sidecar and config volume; the workload's own spec is unchanged")


def write_kubelet_config_dir(config_dir, data):
    """Lays out a ConfigMap the way the kubelet mounts it: files in a timestamped folder,
    ..data pointing at it, and each key a symlink through ..data."""
    config_dir.mkdir(parents=True, exist_ok=True)
    version = config_dir / "..2026_01_01_00_00_00.000000001"
    version.mkdir()
    for key, text in data.items():
        (version / key).write_text(text, encoding="utf-8")
    os.symlink(version.name, config_dir / "..data")
    for key in data:
        os.symlink(f"..data/{key}", config_dir / key)


def launch(root, base_path, rebound_bin, config_dir):
    """Prints, NUL-separated, the command the base's sidecar container runs: the image's
    ENTRYPOINT and the manifest's args and env, with the binary at REBOUND_BIN, the
    ConfigMap laid out under CONFIG_DIR as the kubelet would, and loopback port 0
    instead of the pod's ports (tests never take fixed ports)."""
    docs = load_yaml_documents(base_path)
    deployment = deployments(docs)[0]
    c = sidecar_of(deployment)
    runtime = stages(Path(root) / DOCKERFILE)[0][-1]
    entrypoint = exec_form("ENTRYPOINT", [r for k, r in runtime["body"] if k == "ENTRYPOINT"][-1])
    spec = deployment["spec"]["template"]["spec"]
    mount = next(m for m in c["volumeMounts"] if m["name"] == "rebound-config")
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    data = config_maps(docs)[volume["configMap"]["name"]]["data"]
    config_dir = Path(config_dir)
    write_kubelet_config_dir(config_dir, data)

    args = []
    for arg in c.get("args", []):
        name, eq, value = arg.partition("=")
        if name in ("--listen", "--metrics-listen") and eq:
            arg = f"{name}=127.0.0.1:0"
        elif name == "--config" and eq:
            require(value.startswith(mount["mountPath"]), f"--config {value} is outside {mount['mountPath']}")
            arg = f"{name}={config_dir}{value[len(mount['mountPath']):]}"
        args.append(arg)
    env = [f"{e['name']}={e['value']}" for e in c.get("env", []) if "value" in e]
    argv = ["env", *env, rebound_bin, *entrypoint[1:], *args]
    sys.stdout.write("\0".join(argv) + "\0")


if __name__ == "__main__":
    run({"sidecar": check_sidecar, "launch": launch})
