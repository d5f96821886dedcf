"""Advice that leads to a verdict: how many more clean attempts would make a cell "fixed".

The number inverts the rule the judge applies, not a one-sample rule of thumb: the
smallest n such that n more clean attempts, spread over the hosts this cell is compared on
(one after another in host order), make both of its questions pass at the Holm rank they
would then reach, the effect size (rate ratio below ``fixed_ratio``) included, with the
reference's counts as they are. More attempts than planned are a look past the planned
end, so the rule inverted is the anytime-valid one (``stats.anytime``), which is also the
one every look before the end uses; where the campaign records no plan (its records are
taken as the whole design, as a bench's are) the judge would still judge fixed-n, and so
the advice inverts that. Where the reference never reproduced on these hosts no n exists,
and the advice says so instead of printing a number.

The worst case answers "what if every error or hang in the phase at risk had been a
reproduction": the same comparison with those attempts counted as reproductions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from reprofleet.stats.comparison import p_below, p_fixed
from reprofleet.stats.intervals import stratified
from reprofleet.stats.ratio import BALANCE
from reprofleet.verdicts.families import Families
from reprofleet.verdicts.pairing import Pairing
from reprofleet.verdicts.tally import Tally

CAP = 5_000  # more clean attempts than this is no advice anybody takes


@dataclass(frozen=True)
class Advice:
    """``more``: the clean attempts that would conclude, or None with ``words`` saying why none would."""

    more: int | None
    words: str


def spread(n: int, hosts: tuple[str, ...]) -> dict[str, int]:
    """n attempts over the hosts in turn (the first hosts get one more when n does not divide)."""
    return {h: n // len(hosts) + (1 if i < n % len(hosts) else 0) for i, h in enumerate(hosts)}


def fisher(strata: list[tuple[tuple[int, int], tuple[int, int]]]) -> float:
    """Fisher's one-sided exact p (the conditional test on one host)."""
    return stratified(strata, "less").p_value


def _first(low: int, high: int, concludes: Callable[[int], bool]) -> int | None:
    """The smallest n in [low, high] that concludes, where concluding is monotone in n."""
    step, last = 1, low - 1
    probe = low
    while not concludes(probe):
        if probe >= high:
            return None
        last, probe = probe, min(probe + step, high)
        step *= 2
    while probe - last > 1:
        middle = (last + probe) // 2
        last, probe = (last, middle) if concludes(middle) else (middle, probe)
    return probe


def _segments(pairing: Pairing, table: Mapping[tuple[str, str], Tally], anytime_valid: bool) -> list[tuple[int, int]]:
    """Ranges of n in which one rule applies: the fixed-n score bound only while every host's two
    sides are within 2:1 (``stats.ratio.balanced``), the e-process before and after. More clean
    attempts only raise the cell's side, so "not too few" and "not too many" are each monotone."""
    if anytime_valid:
        return [(1, CAP)]

    def sides(n: int) -> list[tuple[int, int]]:
        return [(cell[1], ref[1]) for cell, ref in pairing.strata(table, spread(n, pairing.hosts)) if cell[1] and ref[1]]

    def enough(n: int) -> bool:
        return all(mine * BALANCE >= theirs for mine, theirs in sides(n))

    def too_many(n: int) -> bool:
        return any(mine > theirs * BALANCE for mine, theirs in sides(n))
    start = _first(1, CAP, enough)
    if start is None or too_many(start):
        return [(1, CAP)]
    past = _first(start, CAP, too_many)
    end = CAP if past is None else past - 1
    return [s for s in ((1, start - 1), (start, end), (end + 1, CAP)) if s[0] <= s[1]]


def more_clean_attempts(pairing: Pairing, table: Mapping[tuple[str, str], Tally], families: Families,
                        fixed_ratio: float, anytime_valid: bool = True) -> Advice:
    """The smallest n of more clean attempts on the comparison hosts that would call the cell fixed."""
    if pairing.reference_counts(table)[0] == 0:
        return Advice(None, "cannot be shown on these hosts: the reference never reproduced there")
    if pairing.cell_counts(table)[0] > 0:
        return Advice(None, "it reproduced on these hosts, so no clean attempts make it fixed")

    def concludes(n: int) -> bool:
        strata = pairing.strata(table, spread(n, pairing.hosts))
        fixed = p_fixed(strata, anytime_valid=anytime_valid, fixed_ratio=fixed_ratio)
        if not families.fixed_passes(pairing.cell_id, fixed):  # cheap first: the exact test only where it matters
            return False
        if not anytime_valid and len(strata) == 1 and families.concludes_fixed(pairing.cell_id, fisher(strata), fixed):
            return True  # Boschloo's p is never above Fisher's (Boschloo 1970), and Boschloo's costs seconds at n = 1000s
        return families.concludes_fixed(pairing.cell_id, p_below(strata, anytime_valid=anytime_valid), fixed)

    found = None
    for low, high in _segments(pairing, table, anytime_valid):
        found = _first(low, high, concludes)
        if found is not None:
            break
    if found is None:
        return Advice(None, f"not even {CAP} more clean attempts on these hosts would show it "
                            f"(the reference's {pairing.reference_counts(table)[0]} reproductions are too few)")
    hosts = ", ".join(pairing.hosts)
    rule = "anytime-valid" if anytime_valid else "fixed-n"
    ref_k, ref_n = pairing.reference_counts(table)
    limit = (f"; the reference's {ref_k}/{ref_n} is what holds it back: more reference attempts on these hosts "
             "would need fewer") if found > 4 * ref_n else ""
    return Advice(found, f"{found} more clean attempt{'s' if found != 1 else ''} on {hosts} would call it fixed "
                         f"({rule} rule, this report's Holm rank and rate ratio included){limit}")
