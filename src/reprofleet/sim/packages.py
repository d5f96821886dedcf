"""Python packages as a simulated host has them: distribution metadata and a local wheelhouse.

The runtime probe reads versions from distribution metadata (``importlib.metadata``), so
the simulated host's site packages carry real ``*.dist-info`` folders for the fake vLLM and
the stack it would bring (torch, triton, flashinfer-python). The simulated fleet has no
network: a ``venv`` runtime installs from a wheelhouse of tiny real wheels built here from
the simulator's own fake vLLM (``pip install --no-index --find-links``), so the engine that
runs in the venv is the venv's, at the venv's version.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from reprofleet.sim.hostfs import HOSTFS, IGNORE, RFSIM
from reprofleet.sim.layout import HostPaths

WHEELHOUSE = "wheelhouse"  # under the host's /etc/reprofleet-sim


@dataclass(frozen=True)
class Stack:
    """The versions a vLLM release pins (what its wheel requires)."""

    torch: str
    triton: str
    flashinfer: str


STACKS = {(0, 25): Stack("2.9.0", "3.5.0", "0.5.2"), (0, 26): Stack("2.9.1", "3.5.1", "0.5.3")}
NEWEST = Stack("2.10.0", "3.6.0", "0.6.0")


def stack_for(vllm: str) -> Stack:
    numbers = tuple(int(p) for p in re.findall(r"\d+", vllm)[:2])
    return STACKS.get((numbers[0], numbers[1]) if len(numbers) == 2 else (0, 0), NEWEST)


def dist_name(name: str) -> str:
    """The folder/wheel spelling of a distribution name (``flashinfer-python`` -> ``flashinfer_python``)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def metadata_text(name: str, version: str, requires: tuple[str, ...] = ()) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             "Summary: reprofleet simulated fleet stand-in"]
    return "\n".join(lines + [f"Requires-Dist: {r}" for r in requires]) + "\n"


def requirements(vllm: str) -> tuple[str, ...]:
    stack = stack_for(vllm)
    return (f"torch=={stack.torch}", f"triton=={stack.triton}", f"flashinfer-python=={stack.flashinfer}")


def write_dist_info(site: Path, name: str, version: str, requires: tuple[str, ...] = (),
                    top_level: str | None = None) -> Path:
    """An installed distribution's metadata folder, as pip leaves it."""
    folder = site / f"{dist_name(name)}-{version}.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "METADATA").write_text(metadata_text(name, version, requires))
    (folder / "INSTALLER").write_text("pip\n")
    (folder / "top_level.txt").write_text(f"{top_level or dist_name(name)}\n")
    (folder / "RECORD").write_text("")
    return folder


def install_host_metadata(site: Path, vllm: str) -> None:
    """The host Python's vllm (the fake one already there) and the stack it would pin."""
    for old in site.glob("*.dist-info"):
        if old.name.split("-", 1)[0] in ("vllm", "torch", "triton", "flashinfer_python"):
            for entry in old.iterdir():
                entry.unlink()
            old.rmdir()
    stack = stack_for(vllm)
    write_dist_info(site, "vllm", vllm, requirements(vllm))
    write_dist_info(site, "torch", stack.torch)
    write_dist_info(site, "triton", stack.triton)
    write_dist_info(site, "flashinfer-python", stack.flashinfer, top_level="flashinfer")


def build_wheel(folder: Path, name: str, version: str, files: dict[str, bytes],
                requires: tuple[str, ...] = ()) -> Path:
    """A real (tiny) py3-none-any wheel: the files, METADATA, WHEEL and a hashed RECORD."""
    info = f"{dist_name(name)}-{version}.dist-info"
    entries = dict(files)
    entries[f"{info}/METADATA"] = metadata_text(name, version, requires).encode()
    entries[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: reprofleet.sim\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for arcname, content in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        record.append(f"{arcname},sha256={digest},{len(content)}")
    record.append(f"{info}/RECORD,,")
    entries[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist_name(name)}-{version}-py3-none-any.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for arcname, content in sorted(entries.items()):
            archive.writestr(zipfile.ZipInfo(arcname, (2020, 1, 1, 0, 0, 0)), content)
    path.write_bytes(buffer.getvalue())
    return path


def _tree(root: Path, prefix: str) -> dict[str, bytes]:
    return {f"{prefix}/{p.relative_to(root)}": p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not IGNORE(str(p.parent), [p.name]) and "__pycache__" not in p.parts}


def vllm_wheel_files(vllm: str) -> dict[str, bytes]:
    """The simulator's fake vLLM (and the rfsim package it drives), pinned to ``vllm``: the
    engine a venv runs is its own, at its own version, whatever the host's default is."""
    source = (HOSTFS / "dist-packages" / "vllm" / "__init__.py").read_text()
    pin = f'import os as _os\n_os.environ["RFSIM_VLLM_VERSION"] = "{vllm}"  # this wheel\'s version\n'
    head, sep, body = source.partition('"""\n\n')  # after the module docstring
    files = {"vllm/__init__.py": (head + sep + pin + body if sep else pin + source).encode()}
    files.update(_tree(RFSIM, "rfsim"))
    return files


def build_wheelhouse(folder: Path, versions: tuple[str, ...]) -> list[Path]:
    """Wheels of the fake vLLM at ``versions`` and of the stack each pins (tiny torch, triton,
    flashinfer-python packages that carry only their ``__version__``)."""
    built = []
    for vllm in versions:
        built.append(build_wheel(folder, "vllm", vllm, vllm_wheel_files(vllm), requirements(vllm)))
        stack = stack_for(vllm)
        for name, module, version in (("torch", "torch", stack.torch), ("triton", "triton", stack.triton),
                                      ("flashinfer-python", "flashinfer", stack.flashinfer)):
            init = f'"""Simulated fleet stand-in: metadata only."""\n__version__ = "{version}"\n'.encode()
            built.append(build_wheel(folder, name, version, {f"{module}/__init__.py": init}))
    return built


def install_host(paths: HostPaths, vllm: str) -> None:
    """At fleet setup: the host Python's package metadata, and a wheelhouse (in the host's
    /etc/reprofleet-sim/wheelhouse) with its own vLLM version, the seed's two and a 0.33 (the
    first with FlashInfer's managed autotune store: rfsim/flashinfer_store.py)."""
    install_host_metadata(paths.fs("dist-packages"), vllm)
    build_wheelhouse(paths.etc / WHEELHOUSE, tuple(dict.fromkeys((vllm, "0.25.1", "0.26.0", "0.33.0"))))
