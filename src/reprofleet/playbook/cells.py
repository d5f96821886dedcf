"""The ``matrix`` -> Cells: names checked unique, each cell's factors merged over the defaults.

A cell's recorded ``factors`` hold every resolved setting, so a report can say exactly
what differed between cells. A cell's ``stop:`` is how long it runs, not what it runs, so
it is no factor: it is not in ``factors``, and ``defaults`` cannot set it.
"""

from __future__ import annotations

from typing import Any

from reprofleet.model import Cell, GpuPolicy, RuntimeKind, StopRule, frozen_mapping

from reprofleet.playbook.document import Doc, valid_name
from reprofleet.playbook.factors import FACTOR_KEYS, GPU_FACTORS, Layer, read_layer, runtime_for, runtime_layer
from reprofleet.playbook.host_debug import host_debug_for
from reprofleet.playbook.judging import stop_rule

CELL_KEYS = ("name", "stop", "cache", *FACTOR_KEYS)  # a cell's `cache` is read by load


def parse_cells(doc: Doc, top: Any) -> tuple[Cell, ...]:
    base = Layer()
    if top.get("runtime") is not None:
        base.maps["runtime"] = runtime_layer(doc, top["runtime"], "runtime")
    defaults = top.get("defaults")
    if defaults is not None:
        if isinstance(defaults, dict) and "stop" in defaults:
            raise doc.fail(defaults, "stop", "defaults.stop", "'stop' is not a factor: write the campaign-wide "
                                                              "rule as a top-level 'stop:', or one cell's in that cell")
        doc.check_keys(defaults, FACTOR_KEYS, "defaults")
        base = read_layer(doc, defaults, "defaults").over(base)
    matrix = top["matrix"]
    if not isinstance(matrix, list) or not matrix:
        raise doc.fail(top, "matrix", "matrix", "must be a non-empty list of cells")
    cells: list[Cell] = []
    for index, entry in enumerate(matrix):
        path = f"matrix[{index}]"
        if not isinstance(entry, dict):
            raise doc.fail(matrix, index, path, "a cell is a mapping with at least 'name'")
        doc.check_keys(entry, CELL_KEYS, path)
        if "name" not in entry:
            raise doc.fail(matrix, index, f"{path}.name", "every cell needs a 'name'")
        name = valid_name(doc, entry, "name", f"{path}.name")
        for earlier in cells:
            if earlier.name == name:
                raise doc.fail(entry, "name", f"{path}.name", f"cell name {name!r} is already used by matrix[{earlier.index}]")
        stop = stop_rule(doc, entry, "stop", f"{path}.stop") if entry.get("stop") is not None else None
        cells.append(_cell(doc, name, index, read_layer(doc, entry, path).over(base), stop))
    return tuple(cells)


def _cell(doc: Doc, name: str, index: int, layer: Layer, stop: StopRule | None) -> Cell:
    gpu = {key: layer.gpu[key].value if key in layer.gpu else None for key in GPU_FACTORS}
    env, args, template_vars = layer.values("env"), layer.values("args"), layer.values("vars")
    runtime = runtime_for(layer.maps["runtime"], template_vars, f"cell {name!r} (matrix[{index}])")
    factors = {
        **{key: list(value) if isinstance(value, tuple) else value for key, value in gpu.items()},
        "env": dict(sorted(env.items())),
        "args": dict(sorted(args.items())),
        "vars": dict(sorted(template_vars.items())),
        "runtime": {"kind": runtime.kind.value, "image": runtime.image, "python": runtime.python,
                    "docker_args": list(runtime.docker_args)},
    }
    if runtime.kind is RuntimeKind.VENV:  # only then: other cells keep the identity they always had
        venv: dict[str, Any] = {"kind": runtime.kind.value, "vllm": runtime.vllm, "pip": runtime.pip.as_dict()}
        factors["runtime"] = venv
    host_debug = host_debug_for(layer.values("host_debug"))
    if not host_debug.is_default:  # only then: a plain cell keeps the identity it always had
        factors["host_debug"] = dict(sorted(host_debug.as_dict().items()))
    return Cell(
        name=name,
        index=index,
        factors=frozen_mapping(factors),
        gpu=GpuPolicy(gpu["graphics_clocks"], gpu["memory_clocks"], gpu["power_limit"],
                      gpu["persistence"], gpu["application_clocks"]),
        env=tuple(sorted(env.items())),
        args=tuple(sorted(args.items())),
        runtime=runtime,
        stop=stop,
        host_debug=host_debug,
    )
