"""Checks of the container image's recipe without a container engine: the
Dockerfile's structure (hadolint lints it separately) and the build context
that /.dockerignore lets through, computed by the Docker SDK's own matcher.

    python3 image.py dockerfile REPO_ROOT
    python3 image.py context REPO_ROOT
"""

import json
import re
import tomllib
from pathlib import Path

from docker.utils.build import exclude_paths

from common import require, run

DOCKERFILE = "deploy/docker/Dockerfile"

#: OCI annotations every published image should carry.
OCI_LABELS = ("title", "description", "version", "revision", "licenses", "source")

#: The biggest build context worth sending; past it something unneeded got in.
MAX_CONTEXT_BYTES = 5 * 1024 * 1024


def instructions(path):
    """(instruction, arguments) pairs, continuation lines joined and comments dropped."""
    logical, current = [], ""
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    require(not current, f"{path}: ends inside a continued line")
    result = []
    for text in logical:
        keyword, _, rest = text.partition(" ")
        result.append((keyword.upper(), rest.strip()))
    return result


def stages(path):
    """Build stages in order: name (or index), base image, instructions."""
    found, global_args = [], {}
    for keyword, rest in instructions(path):
        if keyword == "FROM":
            words = rest.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(found))
            found.append({"name": name, "base": words[0], "body": []})
        elif not found:
            if keyword == "ARG":
                key, _, default = rest.partition("=")
                global_args[key] = default
        else:
            found[-1]["body"].append((keyword, rest))
    return found, global_args


def exec_form(keyword, rest):
    """The JSON array of an exec-form ENTRYPOINT or CMD."""
    try:
        value = json.loads(rest)
    except json.JSONDecodeError:
        value = None
    require(isinstance(value, list) and all(isinstance(v, str) for v in value),
            f"{keyword} must be in exec form (a JSON array), so that SIGTERM reaches rebound: {rest}")
    return value


def labels(body):
    """The LABEL key/value pairs of a stage, quotes removed."""
    pairs = {}
    for keyword, rest in body:
        if keyword == "LABEL":
            for key, value in re.findall(r'([\w.\-]+)=("(?:[^"\\]|\\.)*"|\S+)', rest):
                pairs[key] = value.strip('"')
    return pairs


def check_dockerfile(root):
    """The Dockerfile builds in stages with a cached dependency layer and ships a
    locked-down runtime whose ENTRYPOINT and CMD serve on the container's ports."""
    root = Path(root)
    manifest = tomllib.loads((root / "Cargo.toml").read_text(encoding="utf-8"))["package"]
    found, global_args = stages(root / DOCKERFILE)
    require(len(found) >= 2, "the Dockerfile must have a build stage and a runtime stage")
    runtime = found[-1]
    build_steps = [(s["name"], k, r) for s in found[:-1] for k, r in s["body"]]

    # The dependency layer: dependencies are compiled before the sources are copied in.
    cook = next((i for i, (_, k, r) in enumerate(build_steps) if k == "RUN" and "cargo chef cook" in r), None)
    sources = next((i for i, (_, k, r) in enumerate(build_steps)
                    if k == "COPY" and "--from" not in r and i > (cook or -1)), None)
    final_build = next((i for i, (_, k, r) in enumerate(build_steps)
                        if k == "RUN" and re.search(r"cargo build .*--release", r)), None)
    require(cook is not None, "no dependency layer: expected a `cargo chef cook` step")
    require(sources is not None and final_build is not None and cook < sources < final_build,
            "the dependency layer must come before the sources are copied and built")
    for _, keyword, rest in build_steps:
        if keyword == "RUN" and "cargo " in rest and ("build" in rest or "cook" in rest or "install" in rest):
            require("--locked" in rest, f"cargo must build from Cargo.lock (--locked): {rest}")

    rust = global_args.get("RUST_VERSION", "")
    wanted = manifest["rust-version"]
    as_tuple = lambda v: tuple(int(p) for p in v.split("."))
    require(rust and as_tuple(rust) >= as_tuple(wanted),
            f"ARG RUST_VERSION={rust!r} is below Cargo.toml's rust-version {wanted}")

    base = runtime["base"]
    require(re.match(r"gcr\.io/distroless/(cc|static)-debian\d+(:nonroot)?(@sha256:[0-9a-f]{64})?$", base)
            or base == "scratch", f"runtime base {base} is neither distroless cc/static nor scratch")
    body = runtime["body"]
    users = [r for k, r in body if k == "USER"]
    require(users, "the runtime stage sets no USER: it would run as root")
    uid, _, gid = users[-1].partition(":")
    require(uid.isdigit() and int(uid) != 0 and (not gid or (gid.isdigit() and int(gid) != 0)),
            f"USER {users[-1]} must be a numeric non-root uid:gid (runAsNonRoot checks numbers)")
    require(not any(k == "VOLUME" for k, _ in body), "no VOLUME: Rebound writes nothing to disk")

    entrypoints = [exec_form(k, r) for k, r in body if k == "ENTRYPOINT"]
    cmds = [exec_form(k, r) for k, r in body if k == "CMD"]
    require(entrypoints and cmds, "the runtime stage needs both ENTRYPOINT and CMD")
    entrypoint, cmd = entrypoints[-1], cmds[-1]
    require(len(entrypoint) == 2 and entrypoint[1] == "serve" and Path(entrypoint[0]).name == "rebound",
            f"ENTRYPOINT must be [<path>/rebound, serve], found {entrypoint}")
    copies = [r for k, r in body if k == "COPY" and "--from=" in r]
    require(any(r.split()[-1] == entrypoint[0] for r in copies),
            f"ENTRYPOINT {entrypoint[0]} is not where the binary is copied to ({copies})")
    flags = dict(zip(cmd[::2], cmd[1::2]))
    require(flags.get("--listen") == "0.0.0.0:50051" and flags.get("--metrics-listen") == "0.0.0.0:9464",
            f"CMD must listen on 0.0.0.0:50051 and 0.0.0.0:9464 inside the container, found {cmd}")
    exposed = {p.split("/")[0] for k, r in body if k == "EXPOSE" for p in r.split()}
    require({"50051", "9464"} <= exposed, f"EXPOSE 50051 and 9464, found {sorted(exposed)}")

    found_labels = labels(body)
    missing = [f"org.opencontainers.image.{n}" for n in OCI_LABELS if f"org.opencontainers.image.{n}" not in found_labels]
    require(not missing, f"missing OCI labels: {missing}")
    require(found_labels["org.opencontainers.image.licenses"] == manifest["license"],
            f"licenses label {found_labels['org.opencontainers.image.licenses']} != Cargo.toml {manifest['license']}")
    version_args = [r for k, r in body if k == "ARG" and r.startswith("VERSION=")]
    require(version_args and version_args[0].split("=", 1)[1] == manifest["version"],
            f"ARG VERSION default must be Cargo.toml's version {manifest['version']}")
    print(f"{DOCKERFILE}: {len(found)} stages, dependency layer before the sources, runtime {base}, "
          f"USER {users[-1]}, ENTRYPOINT {entrypoint} CMD {cmd}")


def declared_targets(root, manifest):
    """The files Cargo requires for every target the manifest declares or discovers."""
    needed = {"Cargo.toml", "Cargo.lock"}
    build = manifest["package"].get("build", "build.rs" if (root / "build.rs").exists() else None)
    if build:
        needed.add(build)
    if "lib" in manifest or (root / "src/lib.rs").exists():
        needed.add(manifest.get("lib", {}).get("path", "src/lib.rs"))
    for kind, folder in (("bin", "src/bin"), ("test", "tests"), ("bench", "benches"), ("example", "examples")):
        for target in manifest.get(kind, []):
            if "path" in target:
                needed.add(target["path"])
            elif kind == "bin" and target["name"] == manifest["package"]["name"]:
                needed.add("src/main.rs")
            else:
                single = f"{folder}/{target['name']}.rs"
                needed.add(single if (root / single).exists() else f"{folder}/{target['name']}/main.rs")
    # Auto-discovered targets count too, unless autodiscovery is off.
    for kind, folder in (("autotests", "tests"), ("autobenches", "benches"), ("autoexamples", "examples")):
        if manifest["package"].get(kind, True) and (root / folder).is_dir():
            for path in (root / folder).glob("*.rs"):
                needed.add(str(path.relative_to(root)))
    return needed


def check_context(root):
    """The build context holds every file the build reads and nothing it does not."""
    root = Path(root)
    patterns = [line.strip() for line in (root / ".dockerignore").read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.strip().startswith("#")]
    context = {p for p in exclude_paths(str(root), patterns, dockerfile=DOCKERFILE) if (root / p).is_file()}
    manifest = tomllib.loads((root / "Cargo.toml").read_text(encoding="utf-8"))
    needed = declared_targets(root, manifest)
    for folder in ("src", "proto"):
        needed |= {str(p.relative_to(root)) for p in (root / folder).rglob("*") if p.is_file()}
    missing = sorted(needed - context)
    require(not missing, f".dockerignore keeps out files the build needs: {missing}")
    # The Docker client always sends the Dockerfile and .dockerignore; nothing else outside the list.
    unexpected = sorted(p for p in context - needed - {DOCKERFILE, ".dockerignore"}
                        if not p.startswith("benches/"))
    require(not unexpected, f"the build context carries files the build does not read: {unexpected}")
    size = sum((root / p).stat().st_size for p in context)
    require(size <= MAX_CONTEXT_BYTES, f"build context is {size} bytes, above {MAX_CONTEXT_BYTES}")
    print(f".dockerignore: build context of {len(context)} files, {size // 1024} KiB; "
          f"every declared target and all of src/ and proto/ are in it")


if __name__ == "__main__":
    run({"dockerfile": check_dockerfile, "context": check_context})
