"""Campaign YAML -> validated matrix cells, before any host is contacted.

A campaign runs for hours on machines that freeze, so a typo found after the first power
cycle costs an evening. Everything here is checked up front: unknown keys (with the
closest valid one suggested), value types and ranges, the PoC file, and every runtime
placeholder of every cell. Errors are PlaybookError at ``file:line:field.path``.

Factors merge in three layers: top-level ``runtime`` < ``defaults`` < the cell. ``env``,
``args``, ``vars`` and ``runtime`` merge key by key; a key set to ``null`` in a later layer
removes it (a cell can drop a default env flag); GPU factors set to ``null`` mean "leave
the card at its default".

    from reprofleet.playbook import load_playbook, plan_order
    playbook = load_playbook("playbooks/sm120-hostwedge.yml")

Modules: ``load`` (the file and its top-level settings), ``cells`` (the matrix),
``factors`` (GPU, env/args/vars, runtime and placeholders), ``judging`` (reproductions,
the reference cell, the phase at risk, ``stop:`` rules), ``order`` (attempt order on one
host, with each cell's slots), ``document`` (locations and the checks they share),
``host_debug`` (the ``host_debug:`` factor), ``venv`` (the venv runtime and the ``poc`` pin),
``env_secrets`` (secrets in the PoC's environment, never in a factor), ``search`` (``search:``
and ``bisect:`` blocks: one ordinary cell per level), ``ladder`` (the seam from a search's
records to its model: probes by the outcome roles, the spec, the manifest's copy of it), ``builtin``
(the example playbooks, PoC and inventory shipped as package data; a playbook named by its
built-in name).
"""

from __future__ import annotations

from reprofleet.playbook.cells import CELL_KEYS
from reprofleet.playbook.document import NAME
from reprofleet.playbook.factors import FACTOR_KEYS, GPU_FACTORS, IDENTIFIER, MAP_FACTORS, RUNTIME_KEYS
from reprofleet.playbook.load import CACHE_MODES, ORDERS, POC_KEYS, TIMEOUT_KEYS, TOP_KEYS, load_playbook
from reprofleet.playbook.order import cell_slots, plan_order
from reprofleet.playbook.judging import PHASES, REPRODUCTION_OUTCOMES, STOP_RULES

__all__ = [
    "CACHE_MODES", "CELL_KEYS", "FACTOR_KEYS", "GPU_FACTORS", "IDENTIFIER", "MAP_FACTORS", "NAME", "ORDERS",
    "PHASES", "POC_KEYS", "REPRODUCTION_OUTCOMES", "RUNTIME_KEYS", "STOP_RULES", "TIMEOUT_KEYS", "TOP_KEYS",
    "cell_slots", "load_playbook", "plan_order",
]
