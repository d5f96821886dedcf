"""Is this look at a cell its campaign's planned end, or one before (or after) it?

A fixed-n test is valid once, at the end its sample size was fixed for. Any other look
needs anytime-valid numbers (``stats.anytime``): a campaign still running (a controller
holds its folder's lock), a cell a stop rule ended early, a plan with slots not run yet
(a resume will add them), a cell run more often than planned (extended after its verdict
was seen), or a cell pooled from several campaigns (the later one may have been started
because of the earlier one's verdict), or any cell of a search or bisection (its ladder
chose how often each level ran from what the level showed). The judge learns the plan from ``campaign.json``
(``attempts_per_cell`` and the hosts) and what ran from the records; slots that run again
are not attempts that ran. A campaign with no plan on record is taken as the whole design,
and its caveat (``CampaignInfo.caveat``) says so in the sentence.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

from reprofleet.model import Role
from reprofleet.records.identity import cell_name
from reprofleet.records.pooling import Pool
from reprofleet.verdicts.tally import Judged, natural_key


@dataclass(frozen=True)
class Look:
    """Whether a look is at the planned end (fixed-n), and if not, why not (the sentence's words)."""

    final: bool
    why: tuple[str, ...] = ()

    def joined(self, other: "Look") -> "Look":
        return Look(self.final and other.final, tuple(dict.fromkeys(self.why + other.why)))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class Looks:
    """Looks at every cell name of a pool, host by host."""

    def __init__(self, pool: Pool, judged: Sequence[Judged]) -> None:
        self.pool = pool
        self.ran: Counter[tuple[str, str, str]] = Counter()  # (campaign, cell name, host) -> attempts that ran
        self.campaigns: dict[str, set[str]] = {}
        for item in judged:
            name = cell_name(item.cell_id)
            if item.role is not Role.NOT_RUN:
                self.ran[(item.campaign, name, item.host)] += 1
            self.campaigns.setdefault(name, set()).add(item.campaign)
        self.stopped = {(str(s.get("cell")), str(s.get("host"))) for s in pool.stops}

    def of(self, name: str, hosts: Iterable[str] | None = None) -> Look:
        """The look at cell ``name`` (on ``hosts`` only, when given)."""
        wanted = None if hosts is None else set(hosts)
        campaigns = sorted(self.campaigns.get(name, set()), key=natural_key)
        why: list[str] = []
        if len(campaigns) > 1:
            why.append(f"pooled from {len(campaigns)} campaigns ({', '.join(campaigns)})")
        for campaign in campaigns:
            why += self._campaign(campaign, name, wanted)
        stopped = sorted((h for c, h in self.stopped if c == name and (wanted is None or h in wanted)), key=natural_key)
        if stopped:
            why.append(f"stopped early on {', '.join(stopped)}")
        return Look(not why, tuple(dict.fromkeys(why)))

    def planned(self, name: str) -> bool:
        """Whether any campaign of cell ``name`` records its plan (more attempts would be an extension)."""
        return any((info := self.pool.campaigns.get(c)) is not None and info.plan is not None
                   for c in self.campaigns.get(name, set()))

    def _campaign(self, campaign: str, name: str, wanted: set[str] | None) -> list[str]:
        info = self.pool.campaigns.get(campaign)
        if info is None:
            return []
        why = ["the campaign is still running"] if info.running else []
        if info.adaptive:  # optional stopping by design: which level ran how often depended on what it showed
            return [*why, f"a {info.adaptive} chose how often each level ran from what it saw"]
        if info.plan is None:
            return why
        planned = info.plan.of(name)
        ran = {h: n for (c, cell, h), n in self.ran.items() if c == campaign and cell == name}
        for host in sorted(set(info.plan.hosts) | set(ran), key=natural_key):
            if wanted is not None and host not in wanted:
                continue
            count = ran.get(host, 0)
            if host not in info.plan.hosts:
                why.append(f"{_plural(count, 'attempt')} on {host}, which the plan does not name")
            elif count > planned:
                why.append(f"extended: {_plural(count, 'attempt')} on {host}, {planned} planned")
            elif count < planned and (name, host) not in self.stopped:
                why.append(f"{count} of {planned} planned attempts on {host} so far")
        return why


def look_words(look: Look) -> str:
    """The clause a verdict carries when its numbers are anytime-valid."""
    if look.final:
        return ""
    if not look.why:
        return "anytime-valid, as this is not the planned end"
    shown = list(look.why[:3]) + ([f"{len(look.why) - 3} more"] if len(look.why) > 3 else [])
    return f"anytime-valid, as this is not the planned end: {'; '.join(shown)}"

