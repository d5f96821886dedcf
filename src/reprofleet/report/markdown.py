"""A Markdown report a user can paste into a bug for NVIDIA or vLLM.

Per cell and host: judged attempts, each outcome, the reproduction rate with its exact 95%
interval; each cell against the first (the reference, usually the default policy) with
Fisher's exact test; and for every wedge what the host was doing last (phase, log line,
detection latency, what its previous boot left behind).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from ..model import Outcome
from ..stats import ALL_HOSTS, attempts_to_see, clean_run_bound, compare, summarize

OUTCOMES = ("clean", "error", "hang", "wedge", "reboot", "infra")


def _rate_table(records: Sequence[Mapping[str, Any]], reproductions: tuple[Outcome, ...]) -> list[str]:
    lines = ["| cell | host | judged | " + " | ".join(OUTCOMES) + " | reproduction rate | 95% CI |",
             "| --- | --- | ---: | " + " | ".join("---:" for _ in OUTCOMES) + " | ---: | --- |"]
    for row in summarize(records, reproductions):
        rate = f"{row.rate:.0%} ({row.reproductions}/{row.judged})" if row.judged else "—"
        ci = f"{row.ci_low:.0%}–{row.ci_high:.0%}" if row.judged else "—"
        counts = " | ".join(str(row.counts.get(o, 0)) for o in OUTCOMES)
        host = f"**{row.host}**" if row.host == ALL_HOSTS else row.host
        lines.append(f"| {row.cell} | {host} | {row.judged} | {counts} | {rate} | {ci} |")
    return lines


def _comparisons(records: Sequence[Mapping[str, Any]], reproductions: tuple[Outcome, ...]) -> list[str]:
    pooled = {r.cell: r for r in summarize(records, reproductions) if r.host == ALL_HOSTS}
    if not pooled:
        pooled = {r.cell: r for r in summarize(records, reproductions)}
    cells = list(pooled)
    if len(cells) < 2:
        return []
    reference = pooled[cells[0]]
    lines = [f"Each cell against `{reference.cell}` ({reference.reproductions}/{reference.judged}), pooled over hosts:",
             "", "| cell | reproductions | Fisher exact p | what the count rules out |", "| --- | ---: | ---: | --- |"]
    for cell in cells[1:]:
        row = pooled[cell]
        p_value = compare((row.reproductions, row.judged), (reference.reproductions, reference.judged))
        if row.reproductions == 0 and row.judged:
            bound = f"rate above {clean_run_bound(row.judged):.0%} (95%)"
        elif row.judged:
            bound = f"~{attempts_to_see(row.rate)} attempts to see one at 95%"
        else:
            bound = "nothing judged"
        lines.append(f"| {cell} | {row.reproductions}/{row.judged} | {p_value:.3g} | {bound} |")
    return lines


def _wedges(records: Iterable[Mapping[str, Any]]) -> list[str]:
    wedges = [r for r in records if r.get("outcome") in ("wedge", "reboot")]
    if not wedges:
        return []
    lines = ["| host | cell | outcome | detected after | last phase | last log line | previous boot |",
             "| --- | --- | --- | ---: | --- | --- | --- |"]
    for record in sorted(wedges, key=lambda r: str(r.get("started"))):
        forensics = record.get("forensics") or {}
        findings = forensics.get("findings") or []
        if forensics.get("journal_persistent") is False:
            boot = "journal not persistent: nothing survived"
        elif findings:
            boot = "; ".join(str(f.get("line", ""))[:80] for f in findings[:2])
        else:
            boot = "no Xid/NVRM/AER/MCE/watchdog line" if forensics.get("previous_boot_available") else "—"
        latency = record.get("detect_latency_s")
        line = str(record.get("last_log_line") or "").replace("|", "\\|")[-100:]
        lines.append(f"| {record['host']} | {record['cell']} | {record['outcome']} | "
                     f"{f'{latency:.1f} s' if latency else '—'} | {record.get('last_phase') or '—'} | `{line}` | {boot} |")
    return lines


def render_markdown(records: Sequence[Mapping[str, Any]], reproductions: tuple[Outcome, ...], title: str) -> str:
    infra = Counter(str(r.get("reason", ""))[:80] for r in records if r.get("outcome") == "infra")
    hosts = sorted({str(r["host"]) for r in records})
    parts = [f"# {title}", "",
             f"{len(records)} attempts on {len(hosts)} hosts ({', '.join(hosts)}); reproduction = "
             f"{', '.join(o.value for o in reproductions)}. `infra` attempts could not be judged and are not in any rate.",
             "", "## Rates", "", *_rate_table(records, reproductions)]
    comparison = _comparisons(records, reproductions)
    if comparison:
        parts += ["", "## Against the reference cell", "", *comparison]
    wedges = _wedges(records)
    if wedges:
        parts += ["", "## Every wedge and reboot", "", *wedges]
    if infra:
        parts += ["", "## Not judged (infra)", ""] + [f"- {n}× {reason}" for reason, n in infra.most_common()]
    return "\n".join(parts) + "\n"
