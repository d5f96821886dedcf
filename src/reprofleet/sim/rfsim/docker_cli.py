"""A model of ``docker`` for the unit tests' host trees (tests/conftest.py): ``version``, ``info``,
``pull``, ``image inspect``, ``run``, ``ps`` and ``kill`` (also as ``docker container
ls|ps|run|kill``), with the seed's flags (images: rfsim.docker_images, files in the hw folder).
A simulated fleet's hosts run the real daemon instead (sim/dockerd.py); this model and its
modules (docker_*.py, container.py) stay only for those unit tests.

``docker run`` behaves as the real one does, because the container is the daemon's and not
the client's: the container is recorded in the daemon's state on the host
(rfsim.docker_state), started by a detached shim (rfsim.docker_shim) as PID 1 of a PID
namespace of its own, with private mount and UTS namespaces and its own root
(rfsim.container), and the client only follows it (rfsim.docker_run): SIGTERM, SIGINT and
SIGHUP to the client go to the container's PID 1 (which ignores those it has no handler
for, unless ``--init`` put rfsim.docker_init there), SIGKILL of the client leaves the
container running for ``docker ps`` to list and ``docker kill`` to stop, and a second
container under a name in use is refused (exit 125). The image tag sets the fake vLLM
version (vllm/vllm-openai:v0.25.1 -> 0.25.1). The client's exit code is the container's.

Host-side module: standard library only.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

SERVER_VERSION = "28.3.2"
RC_DOCKER_ERROR = 125
FLAGS_WITH_VALUE = {
    "--gpus", "--ipc", "--env", "-e", "--mount", "-v", "--volume", "--entrypoint", "--name",
    "--network", "--net", "--shm-size", "-w", "--workdir", "--user", "-u", "--ulimit", "--cap-add",
    "--runtime", "--pull", "--env-file", "--hostname", "-h", "--label", "-l",
}
FLAGS_BOOL = {"--rm", "-i", "-t", "-it", "-ti", "--interactive", "--tty", "--init", "--privileged", "-d", "--detach",
              "--sig-proxy"}
DEFAULT_TRUE = {"--sig-proxy"}


class DockerUsage(Exception):
    pass


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    readonly: bool = False
    create: bool = False  # -v creates a missing host directory; --mount refuses it


@dataclass(frozen=True)
class RunSpec:
    image: str
    command: Tuple[str, ...]
    entrypoint: Optional[str] = None
    env: Tuple[Tuple[str, str], ...] = ()
    mounts: Tuple[Mount, ...] = ()
    workdir: Optional[str] = None
    gpus: Optional[str] = None
    remove: bool = False
    name: Optional[str] = None
    flags: Dict[str, str] = field(default_factory=dict)
    labels: Tuple[Tuple[str, str], ...] = ()

    @property
    def init(self) -> bool:
        return self.flags.get("--init") == "true"

    @property
    def detach(self) -> bool:
        return self.flags.get("-d") == "true" or self.flags.get("--detach") == "true"

    @property
    def sig_proxy(self) -> bool:
        return self.flags.get("--sig-proxy", "true") == "true"

    @property
    def vllm_version(self) -> Optional[str]:
        match = re.search(r":v?(\d+\.\d+\.\d+(?:\.\w+)?)$", self.image)
        return match.group(1) if match else None


def parse_mount(text: str) -> Mount:
    """``--mount type=bind,src=/a,dst=/b[,readonly]`` (also source/target/destination, ro)."""
    values: Dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        values[key.strip()] = value.strip() if sep else "true"
    if values.get("type", "volume") != "bind":
        raise DockerUsage(f"invalid argument \"{text}\" for \"--mount\" flag: only type=bind is simulated")
    source = values.get("src") or values.get("source")
    target = values.get("dst") or values.get("target") or values.get("destination")
    if not source or not target:
        raise DockerUsage(f"invalid argument \"{text}\" for \"--mount\" flag: field source/target must not be empty")
    readonly = values.get("readonly", values.get("ro", "false")).lower() in ("true", "1")
    return Mount(source, target, readonly)


def parse_volume(text: str) -> Mount:
    parts = text.split(":")
    if len(parts) < 2 or not parts[0].startswith("/"):
        raise DockerUsage(f"invalid argument \"{text}\" for \"-v, --volume\" flag: only host paths are simulated")
    return Mount(parts[0], parts[1], len(parts) > 2 and "ro" in parts[2].split(","), create=True)


def parse_env(text: str, environ: Dict[str, str]) -> Optional[Tuple[str, str]]:
    key, sep, value = text.partition("=")
    if sep:
        return key, value
    return (key, environ[key]) if key in environ else None


def parse_env_file(path: str, environ: Dict[str, str]) -> List[Tuple[str, str]]:
    """``--env-file PATH``, read when the client starts, as docker reads it: ``KEY=VALUE`` lines,
    ``KEY`` alone taken from the client's environment, blank lines and ``#`` comments skipped."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise DockerUsage(f"open {path}: {exc.strerror.lower() if exc.strerror else exc}") from None
    found = [parse_env(line, environ) for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return [pair for pair in found if pair]


def parse_label(text: str) -> Tuple[str, str]:
    key, _, value = text.partition("=")
    if not key:
        raise DockerUsage(f"invalid argument \"{text}\" for \"-l, --label\" flag: a label needs a key")
    return key, value


NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")


def parse_run(args: List[str], environ: Dict[str, str]) -> RunSpec:
    rest = list(args)
    env: List[Tuple[str, str]] = []
    mounts: List[Mount] = []
    labels: List[Tuple[str, str]] = []
    flags: Dict[str, str] = {}
    while rest and rest[0].startswith("-"):
        token = rest.pop(0)
        flag, sep, value = token.partition("=")
        if flag in FLAGS_BOOL:
            if sep and value.lower() not in ("true", "false", "1", "0"):
                raise DockerUsage(f"invalid argument \"{value}\" for \"{flag}\" flag: strconv.ParseBool: parsing "
                                  f"\"{value}\": invalid syntax")
            flags[flag] = "true" if not sep or value.lower() in ("true", "1") else "false"
            continue
        if flag not in FLAGS_WITH_VALUE:
            raise DockerUsage(f"unknown flag: {flag}")
        if not sep:
            if not rest:
                raise DockerUsage(f"flag needs an argument: {flag}")
            value = rest.pop(0)
        if flag in ("-e", "--env"):
            pair = parse_env(value, environ)
            if pair:
                env.append(pair)
        elif flag == "--env-file":
            env.extend(parse_env_file(value, environ))
        elif flag == "--mount":
            mounts.append(parse_mount(value))
        elif flag in ("-v", "--volume"):
            mounts.append(parse_volume(value))
        elif flag in ("-l", "--label"):
            labels.append(parse_label(value))
        else:
            flags[flag] = value
    if not rest:
        raise DockerUsage("\"docker run\" requires at least 1 argument.")
    name = flags.get("--name")
    if name is not None and not NAME.match(name):
        raise DockerUsage(f"Invalid container name ({name}), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed")
    return RunSpec(
        image=rest[0], command=tuple(rest[1:]), entrypoint=flags.get("--entrypoint"), env=tuple(env),
        mounts=tuple(mounts), workdir=flags.get("-w") or flags.get("--workdir"), gpus=flags.get("--gpus"),
        remove=flags.get("--rm") == "true", name=name, flags=flags, labels=tuple(labels),
    )


def container_env(spec: RunSpec, container_id: str, default_vllm: str) -> Dict[str, str]:
    """The image's environment, then the -e values, plus the simulation's version marker."""
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root", "HOSTNAME": container_id[:12], "LANG": "C.UTF-8",
        "RFSIM_VLLM_VERSION": spec.vllm_version or default_vllm,
    }
    if spec.gpus:
        env["NVIDIA_VISIBLE_DEVICES"] = "all"
    env.update(dict(spec.env))
    return env


def container_config(spec: RunSpec, argv: List[str], default_vllm: str) -> Dict[str, object]:
    """What the daemon records for a container, and the plan its PID 1 follows."""
    container_id = secrets.token_hex(32)
    return {
        "id": container_id, "name": spec.name, "image": spec.image, "labels": dict(spec.labels),
        "command": argv, "remove": spec.remove, "init": spec.init,
        "plan": {"argv": argv, "mounts": [asdict(m) for m in spec.mounts], "workdir": spec.workdir or "/",
                 "env": container_env(spec, container_id, default_vllm), "init": spec.init},
    }


def run_container(spec: RunSpec) -> int:
    from . import docker_run, hwio  # late: `docker version` must work without the hw dir

    for mount in spec.mounts:
        if not os.path.exists(mount.source):
            if mount.create:
                os.makedirs(mount.source, exist_ok=True)
            else:
                _err(f"docker: Error response from daemon: invalid mount config for type \"bind\": "
                     f"bind source path does not exist: {mount.source}.")
                return RC_DOCKER_ERROR
    argv = ([spec.entrypoint] if spec.entrypoint else []) + list(spec.command)
    if not argv:
        _err("docker: Error response from daemon: no command specified.")
        return RC_DOCKER_ERROR
    config = container_config(spec, argv, str(hwio.host_config().get("vllm_version", "0.25.1")))
    return docker_run.run(config, spec.detach, dict(os.environ), sig_proxy=spec.sig_proxy)


def _err(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


TEMPLATE = re.compile(r"\{\{\s*(json\s+)?\.(\w+)\s*\}\}")


def render_format(template: str, image: Dict[str, object]) -> str:
    """docker's Go template, as far as scripts use it on images: ``{{.Id}}``, ``{{json .RepoDigests}}``."""
    def field_value(match: "re.Match[str]") -> str:
        key = match.group(2)
        if key not in image:
            raise DockerUsage(f"template: :1:{match.start() + 3}: executing \"\" at <.{key}>: "
                              f"map has no entry for key \"{key}\"")
        value = image[key]
        if match.group(1):
            return json.dumps(value, separators=(",", ":"))
        return " ".join(str(v) for v in value) if isinstance(value, list) else str(value)
    return TEMPLATE.sub(field_value, template)


def image_inspect(args: List[str]) -> int:
    """``docker image inspect [--format T] IMAGE...``: the local store's images, or an error per missing one."""
    from . import docker_images

    template: Optional[str] = None
    names: List[str] = []
    rest = list(args)
    while rest:
        token = rest.pop(0)
        if token in ("-f", "--format"):
            if not rest:
                raise DockerUsage(f"flag needs an argument: {token}")
            template = rest.pop(0)
        elif token.startswith("--format="):
            template = token.split("=", 1)[1]
        elif token.startswith("-"):
            raise DockerUsage(f"unknown flag: {token}")
        else:
            names.append(token)
    if not names:
        raise DockerUsage("\"docker image inspect\" requires at least 1 argument.")
    found = [(name, docker_images.local(name)) for name in names]
    shown = [image for _, image in found if image is not None]
    if template is None:
        print(json.dumps(shown, indent=4))
    else:
        for image in shown:
            print(render_format(template, image))
    missing = [name for name, got in found if got is None]
    for name in missing:
        _err(f"Error response from daemon: No such image: {name}")
    return 1 if missing else 0


def pull_image(tag: str, quiet: bool = False) -> int:
    """``docker pull TAG`` against the simulated registry (hw/docker/registry.json)."""
    from . import docker_images

    tag = docker_images.normalized(tag)
    before = docker_images.local(tag)
    image = docker_images.pull(tag)
    if image is None:
        _err(f"Error response from daemon: manifest for {tag} not found: manifest unknown: manifest unknown")
        return 1
    digest = str(image["RepoDigests"][0]).split("@", 1)[1]
    if not quiet:
        repo, _, name = tag.rpartition(":")
        print(f"{name}: Pulling from {repo}")
        print(f"Digest: {digest}")
        fresh = before is None or before.get("Id") != image["Id"]
        print(f"Status: {'Downloaded newer image' if fresh else 'Image is up to date'} for {tag}")
    print(f"docker.io/{tag}")
    return 0


def ensure_image(tag: str) -> bool:
    """``docker run`` of an image the host lacks pulls it first (``--pull=missing``), as docker does."""
    from . import docker_images

    if docker_images.local(tag) is not None:
        return True
    _err(f"Unable to find image '{docker_images.normalized(tag)}' locally")
    if docker_images.pull(tag) is None:
        _err(f"docker: Error response from daemon: manifest for {tag} not found: manifest unknown.")
        return False
    return True


def docker_info(args: List[str]) -> int:
    """``docker info --format '{{json .Runtimes}}'``: the daemon's runtimes, as dockerd lists
    them (runc under both its names; ``nvidia`` once ``nvidia-ctk runtime configure`` ran),
    unless the host's config says the NVIDIA Container Toolkit is not installed."""
    from . import hwio

    runtimes: Dict[str, object] = {"io.containerd.runc.v2": {"path": "runc"}, "runc": {"path": "runc"}}
    if hwio.host_config().get("nvidia_container_runtime", True):
        runtimes["nvidia"] = {"path": "nvidia-container-runtime"}
    if args in (["--format", "{{json .Runtimes}}"], ["--format={{json .Runtimes}}"]):
        print(json.dumps(runtimes, separators=(",", ":")))
        return 0
    print(f"Client:\n Version:    {SERVER_VERSION}\n\nServer:\n Server Version: {SERVER_VERSION}\n"
          f" Runtimes: {' '.join(sorted(runtimes))}\n Default Runtime: runc")
    return 0


ALIASES = {("container", "ls"): "ps", ("container", "ps"): "ps", ("container", "list"): "ps",
           ("container", "kill"): "kill", ("container", "run"): "run"}


def main(argv: List[str]) -> int:
    if not argv:
        _err("Usage:  docker [OPTIONS] COMMAND")
        return 0
    if tuple(argv[:2]) in ALIASES:
        argv = [ALIASES[(argv[0], argv[1])], *argv[2:]]
    if argv[0] == "version":
        if argv[1:3] == ["--format", "{{.Server.Version}}"] or argv[1:] == ["--format={{.Server.Version}}"]:
            print(SERVER_VERSION)
        else:
            print(f"Client:\n Version:           {SERVER_VERSION}\n\nServer: Docker Engine - Community\n"
                  f" Engine:\n  Version:          {SERVER_VERSION}")
        return 0
    if argv[0] == "info":
        return docker_info(argv[1:])
    if argv[0] in ("ps", "kill"):
        from . import docker_ps

        return docker_ps.ps(argv[1:]) if argv[0] == "ps" else docker_ps.kill(argv[1:])
    try:
        if argv[0] == "pull" and len(argv) >= 2:
            return pull_image(argv[-1], quiet=("-q" in argv[1:-1] or "--quiet" in argv[1:-1]))
        if argv[:2] == ["image", "inspect"]:
            return image_inspect(argv[2:])
    except DockerUsage as exc:
        _err(f"{exc}")
        return 1
    if argv[0] != "run":
        _err(f"docker: '{argv[0]}' is not a docker command "
             "(simulated docker knows: version, info, run, ps, kill, pull, image inspect).")
        return 1
    try:
        spec = parse_run(argv[1:], dict(os.environ))
    except DockerUsage as exc:
        _err(f"docker: {exc}\nSee 'docker run --help'.")
        return RC_DOCKER_ERROR
    if not ensure_image(spec.image):
        return RC_DOCKER_ERROR
    return run_container(spec)
