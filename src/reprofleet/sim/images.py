"""Docker images for the simulated hosts' real daemons, built offline from this machine.

No registry is reachable from a simulated fleet, so the images a playbook names
(``vllm/vllm-openai:v0.25.1``) are made here, in two layers:

* a **root file system** of Debian's Python: every file ``dpkg -L`` lists for the packages of
  ``IMAGE_PACKAGES`` (the interpreter, its standard library and the libraries they load), laid
  out merged-/usr as Debian 12 is, tarred and ``docker import``-ed. The tarball is cached in
  ``<base>/images/`` under a key of the packages' installed versions, so it is built once per
  machine and again only after an upgrade;
* per **vLLM version**, a ``docker build`` (classic builder, no network: ``COPY`` only) on top
  of it that adds the simulator's fake vLLM pinned to that version, the ``rfsim`` package it
  drives and ``pynvml`` (as a vLLM image carries ``nvidia-ml-py``), tagged as the playbooks name it.

Both are built on a builder daemon (sim/image_store.py), ``docker save``-d into one cached
archive (keyed by every byte that goes in), ``docker load``-ed once into the image store that
every host's data root is filled from: the same tag is the same image id on every host and in
every run, as an image pulled from a registry is.

The GPU itself (the host's hardware folder, ``nvidia-smi``) is not in the image: the ``nvidia``
runtime (sim/gpu_runtime.py) mounts it, as NVIDIA's toolkit mounts the driver. An imported image
has no repo digest: a record identifies it by its image id.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Iterable, Sequence

from reprofleet.sim import packages
from reprofleet.sim.hostfs import HOSTFS
from reprofleet.sim.procs import SimError, run

IMAGE_PACKAGES = (
    "libc6", "python3.11-minimal", "libpython3.11-minimal", "libpython3.11-stdlib", "python3-minimal",
    "zlib1g", "libexpat1", "libssl3", "libffi8", "libbz2-1.0", "liblzma5", "libuuid1", "libcrypt1",
)
MERGED_USR = {"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}
SKIPPED = ("usr/share/doc/", "usr/share/man/", "usr/share/lintian/", "usr/share/locale/", "usr/share/info/")
ETC_FILES = ("/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf")
SITE = "usr/local/lib/python3.11/dist-packages"
STDLIB = "usr/lib/python3.11"
STDLIB_ZIP = "usr/lib/python311.zip"
BASE_REPO = "reprofleet-sim/python"
VLLM_REPO = "vllm/vllm-openai"
DEFAULT_VLLM_TAGS = ("0.24.0", "0.25.1", "0.26.0", "0.27.0")  # what the playbooks and fleet tests name (0.99.0: none)
IMPORT_TIMEOUT_S = 120.0
ROOTFS_LAYOUT = 2  # bump when build_rootfs lays the files out otherwise: a new cache key
PYTHON = "/usr/bin/python3.11"  # the image's interpreter: its byte code is compiled by the same one


def image_tag(vllm: str) -> str:
    return f"{VLLM_REPO}:v{vllm}"


def package_versions(names: Sequence[str] = IMAGE_PACKAGES) -> str:
    """``name version`` lines as dpkg has them installed: the root file system's cache key."""
    out = run(["dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n", *names], check=False)
    lines = sorted(line for line in out.splitlines() if line.strip())
    missing = sorted(set(names) - {line.split()[0] for line in lines if line.split()[-1].startswith("ii")})
    if missing:
        raise SimError(f"the simulated hosts' image needs Debian packages not installed here: {', '.join(missing)}")
    return "\n".join(lines) + "\n"


def rootfs_key(versions: str) -> str:
    return hashlib.sha256(f"{ROOTFS_LAYOUT}\n{versions}".encode()).hexdigest()[:16]


def package_files(names: Sequence[str] = IMAGE_PACKAGES) -> list[Path]:
    """Every regular file and link the packages installed (no docs), as dpkg lists them."""
    out = run(["dpkg", "-L", *names], timeout_s=30.0)
    files = []
    for line in sorted(set(out.splitlines())):
        path = Path(line.strip())
        if not line.startswith("/") or str(path).lstrip("/").startswith(SKIPPED):
            continue
        if path.is_symlink() or path.is_file():
            files.append(path)
    return files


def image_path(path: Path) -> str:
    """Where a machine path lands in the merged-/usr image (``/lib/x/y`` -> ``usr/lib/x/y``)."""
    relative = str(path).lstrip("/")
    head, sep, rest = relative.partition("/")
    return f"{MERGED_USR[head]}/{rest}" if head in MERGED_USR and sep else relative


def build_rootfs(cache_dir: Path) -> tuple[Path, str]:
    """The cached root file system tarball (built now if missing) and its key."""
    key = rootfs_key(package_versions())
    target = cache_dir / f"python-{key}.tar"
    if target.exists():
        return target, key
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")  # two fleets may build at once
    with tarfile.open(tmp, "w") as archive:
        _add_dirs(archive, ("etc", "tmp", "root", "proc", "sys", "dev", "usr/bin", "usr/lib", "usr/lib64", "usr/sbin",
                            SITE))
        for name, where in MERGED_USR.items():
            link = tarfile.TarInfo(name)
            link.type, link.linkname = tarfile.SYMTYPE, where
            archive.addfile(link)
        added: set[str] = set()
        zipped: dict[str, Path] = {}
        for path in (*package_files(), *_etc_files()):
            name = image_path(path)
            if name in added or name in MERGED_USR:  # /lib/x and /usr/lib/x are one file here
                continue
            added.add(name)
            if _zippable(name, path):
                zipped[name[len(STDLIB) + 1:]] = path
            else:
                archive.add(str(path), arcname=name, recursive=False)
        _add_bytes(archive, STDLIB_ZIP, _stdlib_zip(zipped))
    os.replace(tmp, target)
    return target, key


def _zippable(name: str, path: Path) -> bool:
    """The standard library's pure-Python modules (``os.py`` stays a file: the interpreter's
    landmark for its prefix)."""
    return (name.startswith(f"{STDLIB}/") and name.endswith(".py") and "/lib-dynload/" not in name
            and name != f"{STDLIB}/os.py" and not path.is_symlink())


def _stdlib_zip(files: dict[str, Path]) -> bytes:
    """The modules and their byte code as ``python311.zip``, which Python's default sys.path
    searches first: one file in each host's image store instead of hundreds (every host loads
    the image, and a fleet's teardown deletes it)."""
    sources = {arcname: path.read_bytes() for arcname, path in files.items()}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for arcname, content in sorted({**sources, **compiled(sources, legacy=True)}.items()):
            archive.writestr(zipfile.ZipInfo(arcname, (2020, 1, 1, 0, 0, 0)), content)
    return buffer.getvalue()


def _etc_files() -> Iterable[Path]:
    for name in ETC_FILES:
        path = Path(name)
        if path.is_dir():
            yield from sorted(p for p in path.iterdir() if p.is_file())
        elif path.is_file():
            yield path


def _add_dirs(archive: tarfile.TarFile, names: Iterable[str]) -> None:
    done: set[str] = set()
    for name in names:
        parts = name.split("/")
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            if folder in done:
                continue
            done.add(folder)
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            archive.addfile(info)


def version_sources(vllm: str) -> dict[str, bytes]:
    """What the per-version layer adds under dist-packages: the fake vLLM pinned to ``vllm``,
    rfsim, pynvml and vLLM's distribution metadata."""
    files = dict(packages.vllm_wheel_files(vllm))
    files["pynvml.py"] = (HOSTFS / "dist-packages" / "pynvml.py").read_bytes()
    meta = packages.metadata_text("vllm", vllm, packages.requirements(vllm)).encode()
    files[f"{packages.dist_name('vllm')}-{vllm}.dist-info/METADATA"] = meta
    return files


def version_context(base: str, vllm: str) -> bytes:
    """A build context (tar) whose Dockerfile adds :func:`version_sources` (and their byte code)
    to ``base``."""
    files = version_sources(vllm)
    files.update(compiled(files, legacy=False))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        dockerfile = (f"FROM {base}\nCOPY site/ /{SITE}/\nENV RFSIM_VLLM_VERSION={vllm}\n"
                      f'LABEL org.reprofleet.sim.vllm="{vllm}"\n')
        _add_bytes(archive, "Dockerfile", dockerfile.encode())
        for name, content in sorted(files.items()):
            _add_bytes(archive, f"site/{name}", content)
    return buffer.getvalue()


def compiled(sources: dict[str, bytes], *, legacy: bool) -> dict[str, bytes]:
    """Byte code of the ``.py`` files among ``sources``, by the image's own interpreter, as
    unchecked hash-based pycs (PEP 552: valid whatever the files' times in the image), so that
    a container does not compile every module it imports at every start. ``legacy``: ``x.pyc``
    beside ``x.py`` (what zipimport reads), else ``__pycache__/x.cpython-311.pyc``."""
    with tempfile.TemporaryDirectory(prefix="rfsim-pyc-") as folder:
        root = Path(folder)
        for name, content in sources.items():
            if name.endswith(".py"):
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_bytes(content)
        run([PYTHON, "-m", "compileall", "-q", *(["-b"] if legacy else []), "--invalidation-mode",
             "unchecked-hash", "-d", "/", str(root)], timeout_s=IMPORT_TIMEOUT_S)
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.pyc"))}


def _add_bytes(archive: tarfile.TarFile, name: str, content: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(content), 0o644
    archive.addfile(info, io.BytesIO(content))


def archive_path(cache_dir: Path, versions: Sequence[str]) -> tuple[Path, str]:
    """Where the saved images for ``versions`` are cached, keyed by every byte that goes into
    them (the packages' versions, the fake vLLM's files), and the root file system's key."""
    key = rootfs_key(package_versions())
    digest = hashlib.sha256(key.encode())
    for vllm in sorted(set(versions)):
        for name, content in sorted(version_sources(vllm).items()):  # sources: byte code is not reproducible
            digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    return cache_dir / f"vllm-images-{digest.hexdigest()[:16]}.tar", key


def ensure_archive(builder: Sequence[str], cache_dir: Path, versions: Sequence[str]) -> Path:
    """The images for ``versions`` as one ``docker save`` archive, built on the daemon that
    ``builder`` (a client argv) talks to if the cache lacks it. Every host ``docker load``s the
    same archive, so one tag is one image id on every host and in every run, as a registry's
    image is; an imported image has no repo digest."""
    target, key = archive_path(cache_dir, versions)
    if target.exists():
        return target
    rootfs, _ = build_rootfs(cache_dir)
    base = f"{BASE_REPO}:{key}"
    run([*builder, "import", "--change", 'CMD ["/usr/bin/python3"]', str(rootfs), base], timeout_s=IMPORT_TIMEOUT_S)
    tags = [image_tag(vllm) for vllm in sorted(set(versions))]
    for vllm, tag in zip(sorted(set(versions)), tags):
        _build(builder, tag, version_context(base, vllm))
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    run([*builder, "save", "-o", str(tmp), *tags], timeout_s=IMPORT_TIMEOUT_S)
    os.replace(tmp, target)
    return target


def load(docker: Sequence[str], archive: Path) -> None:
    """``docker load`` the cached images into one host's daemon."""
    run([*docker, "load", "-q", "-i", str(archive)], timeout_s=IMPORT_TIMEOUT_S)


def _build(docker: Sequence[str], tag: str, context: bytes) -> None:
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}  # the classic builder: no BuildKit, no network
    try:
        done = subprocess.run([*docker, "build", "--quiet", "--network", "none", "-t", tag, "-"], input=context,
                              capture_output=True, timeout=IMPORT_TIMEOUT_S, env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SimError(f"docker build of {tag} did not finish in {IMPORT_TIMEOUT_S:g}s") from exc
    if done.returncode != 0:
        raise SimError(f"docker build of {tag} failed: {done.stderr.decode(errors='replace').strip()[-400:]}")
