"""The machines side by side: one row per fact, one column per host, differences marked.

When one host freezes and its twin does not, the first question is what differs between
them (VBIOS, driver, kernel, board BIOS, software versions): the rows where hosts disagree
are highlighted so that is a glance, not a diff. Identifiers that always differ (serials,
UUIDs, boot ids) are left out, so a highlight always means something.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from reprofleet.records.reader import RecordedAttempt

Facts = Mapping[str, Any]


@dataclass(frozen=True)
class FactRow:
    label: str
    values: tuple[str, ...]  # one per host, "—" when unknown

    @property
    def differs(self) -> bool:
        return len(set(self.values)) > 1


def _gpu(facts: Facts, key: str) -> Any:
    gpus = facts.get("gpus") or []
    values = [g.get(key) for g in gpus if isinstance(g, dict)]
    return ", ".join(dict.fromkeys(str(v) for v in values if v is not None)) or None


def _gpu_names(facts: Facts) -> Any:
    gpus = [g for g in facts.get("gpus") or [] if isinstance(g, dict)]
    if not gpus:
        return None
    names = list(dict.fromkeys(str(g.get("name")) for g in gpus))
    return f"{len(gpus)}× {', '.join(names)}"


def _power_limit(facts: Facts) -> Any:
    limits = [g.get("power_limit_w") or {} for g in facts.get("gpus") or [] if isinstance(g, dict)]
    return ", ".join(dict.fromkeys(f"{lim.get('default')} W (max {lim.get('max')} W)" for lim in limits)) or None


def _join(*values: Any) -> Any:
    present = [str(v) for v in values if v not in (None, "")]
    return " ".join(present) or None


def _software(name: str) -> Callable[[Facts], Any]:
    """vLLM/FlashInfer/torch versions, where the host's facts carry them (top level or ``software``)."""
    def read(facts: Facts) -> Any:
        software = facts.get("software")
        return facts.get(name) or (software.get(name) if isinstance(software, dict) else None)
    return read


def _dmi(*keys: str) -> Callable[[Facts], Any]:
    return lambda f: _join(*((f.get("dmi") or {}).get(k) for k in keys))


FIELDS: tuple[tuple[str, Callable[[Facts], Any]], ...] = (
    ("GPU", _gpu_names),
    ("VBIOS", lambda f: _gpu(f, "vbios")),
    ("driver", lambda f: f.get("driver_version")),
    ("CUDA (driver)", lambda f: f.get("cuda_driver_version")),
    ("GPU power limit", _power_limit),
    ("PCI bus", lambda f: _gpu(f, "pci_bus_id")),
    ("kernel", lambda f: f.get("kernel")),
    ("OS", lambda f: (f.get("os") or {}).get("pretty_name")),
    ("system", _dmi("sys_vendor", "product_name")),
    ("board", _dmi("board_vendor", "board_name")),
    ("BIOS", _dmi("bios_vendor", "bios_version", "bios_date")),
    ("CPU", lambda f: (f.get("cpu") or {}).get("model")),
    ("memory", lambda f: f"{f['memory_bytes'] / 2**30:.0f} GiB" if isinstance(f.get("memory_bytes"), int) else None),
    ("vLLM", _software("vllm")),
    ("FlashInfer", _software("flashinfer")),
    ("torch", _software("torch")),
    ("docker", lambda f: f.get("docker")),
    ("host Python", lambda f: f.get("python")),
    ("journal persistent", lambda f: f.get("journal_persistent")),
    ("NVML", lambda f: f.get("nvml")),
)


def _text(value: Any) -> str:
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def fact_rows(facts: Mapping[str, Facts], runtimes: Mapping[str, str]) -> list[FactRow]:
    """Rows in ``FIELDS`` order; ``runtimes``: per host, the PoC runtimes its records name."""
    hosts = list(facts)
    rows = [FactRow(label, tuple(_text(read(facts[h])) for h in hosts)) for label, read in FIELDS]
    rows.append(FactRow("PoC runtime (records)", tuple(runtimes.get(h, "—") for h in hosts)))
    return [r for r in rows if any(v != "—" for v in r.values)]


def runtimes_by_host(records: Sequence[RecordedAttempt]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    for record in records:
        label = record.runtime.get("label")
        if label:
            found.setdefault(record.host, [])
            if label not in found[record.host]:
                found[record.host].append(str(label))
    return {h: ", ".join(sorted(v)) for h, v in found.items()}


def facts_html(facts: Mapping[str, Facts], records: Sequence[RecordedAttempt]) -> str:
    if not facts:
        return '<p class="note">No host facts were recorded (no <code>facts/&lt;host&gt;.json</code> in these folders).</p>'
    rows = fact_rows(facts, runtimes_by_host(records))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in facts)
    body = []
    for row in rows:
        cls = ' class="differs"' if row.differs else ""
        cells = "".join(f"<td>{html.escape(v)}</td>" for v in row.values)
        body.append(f"<tr{cls}><th scope=\"row\">{html.escape(row.label)}{' ≠' if row.differs else ''}</th>{cells}</tr>")
    differing = [r.label for r in rows if r.differs]
    summary = (f"<p>The hosts differ in: <b>{html.escape(', '.join(differing))}</b> (highlighted).</p>" if differing
               else "<p>Every recorded fact is the same on every host.</p>") if len(facts) > 1 else ""
    return (f'{summary}<table class="facts"><thead><tr><th>fact</th>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")
