"""Writes docs/schema/<task>.schema.json: the JSON Schema of every ``--json`` shape.

The schema files are what is published; this writes them from one set of definitions, so a
verdict is described once and inlined in every shape that carries verdicts (each file stands
alone: a script validates with one file). After changing a ``to_json()``, change its
definition here and run ``python docs/schema/generate.py``; tests/unit/test_cli_json.py checks that
the files are this script's output and that every task's output validates against its file.
Stdlib only, and nothing of reprofleet: it describes the shapes, it does not derive them.
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent
BASE = "urn:reprofleet:schema:"  # an absolute URI that claims no web host: the files ship in docs/schema/

Node = dict[str, Any]


def T(kind: str, description: str, **more: Any) -> Node:
    return {"type": kind, "description": description, **more}


def S(description: str, **more: Any) -> Node:
    return T("string", description, **more)


def I(description: str, **more: Any) -> Node:  # noqa: E743 - I for integer, beside S, N, B
    return T("integer", description, **more)


def N(description: str, **more: Any) -> Node:
    return T("number", description, **more)


def B(description: str, **more: Any) -> Node:
    return T("boolean", description, **more)


def nul(kind: str, description: str, **more: Any) -> Node:
    """A value of ``kind``, or null."""
    return {"type": [kind, "null"], "description": description, **more}


def A(items: Node, description: str, **more: Any) -> Node:
    return {"type": "array", "description": description, "items": items, **more}


def R(name: str, description: str | None = None) -> Node:
    """A reference to one of the file's own $defs."""
    out: Node = {"$ref": f"#/$defs/{name}"}
    if description:
        out["description"] = description
    return out


def NR(name: str, description: str) -> Node:
    return {"description": description, "anyOf": [{"$ref": f"#/$defs/{name}"}, {"type": "null"}]}


def O(description: str, props: Node, required: list[str] | None = None) -> Node:  # noqa: E741
    """An object; every property required unless ``required`` says which. More keys are
    allowed: a shape may grow a field without breaking a script that validates."""
    return {"type": "object", "description": description, "properties": props,
            "required": list(props) if required is None else required}


def _course(description: str) -> Node:
    """One cell's course per host under one truth (campaign/stop_walk.py's Course)."""
    return O(description, {"attempts": N("expected attempts"), "reproductions": N("expected reproductions (power cycles)"),
                           "fixed": N("P(the stop rule ended it with the claim fixed)"),
                           "reproduces": N("P(the stop rule ended it with the claim reproduces)"),
                           "no_claim": N("P(it ran to its cap or out of slots with no claim)")})


def _scenario(description: str) -> Node:
    """A host's whole plan under one truth (campaign/estimate.py's Scenario)."""
    return O(description, {"attempts": N("expected attempts per host"), "power_cycles": N("expected power cycles per host"),
                           "duration_s": N("expected seconds per host")})


def M(values: Node, description: str) -> Node:
    """A map: any key, each value as ``values``."""
    return {"type": "object", "description": description, "additionalProperties": values}


# Every outcome a record can have (src/reprofleet/model/outcomes.py, Outcome; the README's outcome table),
# in its order; tests/unit/test_outcome_outputs.py holds the two to the same list.
OUTCOMES = {
    "clean": "the PoC exited 0",
    "error": "the PoC exited non-zero, the host fine",
    "hang": "the host answered, the PoC did not finish in time",
    "wedge": "the host stopped answering",
    "reboot": "the host came back by itself with a new boot_id",
    "power_loss": "the host lost power: its outlet or chassis read off before the controller switched anything",
    "infra": "could not be judged",
}
OUTCOME = S("outcome", enum=list(OUTCOMES))


def COUNTS(description: str) -> Node:  # noqa: N802 - a node maker, as O and M
    """Counts by outcome: every outcome its own key (0 included); a later version's outcome may follow."""
    return {"type": "object", "description": description,
            "properties": {name: I(f"{name}: {words}", minimum=0) for name, words in OUTCOMES.items()},
            "required": list(OUTCOMES), "additionalProperties": I("an outcome a later version records", minimum=0)}


INTERVAL = O("A confidence interval or bound, as the report prints it", {
    "low": N("lower end (0 for an upper bound)"), "high": N("upper end (1 for a lower bound)"),
    "confidence": N("confidence level, e.g. 0.95"),
    "sided": S("two-sided, upper (high is the bound) or lower (low is the bound)", enum=["two-sided", "upper", "lower"]),
    "method": S("how it was computed, e.g. exact (Clopper-Pearson)"), "label": S("the words the report prints")})
COMPARISON = O("A test between a cell and the reference (or between hosts), raw and Holm-adjusted", {
    "alternative": S("the alternative hypothesis: less (the cell reproduces less often) or two-sided"),
    "p_value": N("raw p-value"), "p_adjusted": N("Holm-adjusted across the report's family"),
    "method": S("the test, in words"), "odds_ratio": nul("number", "the common odds ratio, where estimated"),
    "heterogeneity_p": nul("number", "do hosts disagree about the effect?"),
    "ratio_upper": nul("number", "one-sided upper bound on the rate ratio cell / reference (null: unbounded)"),
    "ratio_method": S("how ratio_upper was computed"), "fixed_ratio": nul("number", "the playbook's fixed_ratio"),
    "p_fixed": nul("number", "p-value of 'ratio >= fixed_ratio'"),
    "p_fixed_adjusted": nul("number", "the same, Holm-adjusted"),
    "anytime": B("anytime-valid numbers (this look is not the planned end)"),
    "hosts": A(S("host"), "the hosts that ran both"),
    "strata": A(A(A(I("count"), "[k, n]"), "[[cell k, n], [reference k, n]]"), "per host of hosts")},
    required=["alternative", "p_value", "p_adjusted", "method"])
SPLIT = O("A cell's rate in two groups of its own attempts", {
    "what": S("what splits the attempts"), "yes_label": S("label of the first group"),
    "no_label": S("label of the second group"), "yes": A(I("count"), "[reproductions, judged] of the first group"),
    "no": A(I("count"), "[reproductions, judged] of the second group"), "p_value": N("raw p-value"),
    "p_adjusted": N("Holm-adjusted"), "flagged": B("the difference is real at the report's alpha")})
VERDICT = O("One cell's verdict with every number its sentence rests on", {
    "cell": S("display name (name, or name@hash when one name ran two contents)"),
    "cell_id": S("the cell's identity: name@hash of its factors"),
    "verdict": S("the verdict's kind", enum=["reproduces", "reproduces less often", "fixed", "clean so far",
                                             "no difference shown", "host-specific", "cannot judge"]),
    "text": S("the verdict sentence, as every report prints it"), "reference": B("this is the reference cell"),
    "reproductions": I("attempts that count as reproductions", minimum=0),
    "judged": I("attempts in the rate", minimum=0), "excluded": I("attempts left out of the rate", minimum=0),
    "at_risk": I("errors and hangs in the phase at risk", minimum=0),
    "not_run": I("slots that run again (count for nothing)", minimum=0),
    "early": I("reproductions before the phase at risk", minimum=0),
    "hosts": A(S("host"), "hosts with judged attempts of this cell"),
    "hosts_reproducing": A(S("host"), "hosts where it reproduced"),
    "compared_hosts": A(S("host"), "hosts that ran both this cell and the reference"),
    "rate": R("interval", "the reproduction rate's interval"), "bound": NR("interval", "the bound a clean cell rests on"),
    "against_reference": NR("comparison", "the comparison with the reference (null for the reference)"),
    "hosts_differ": NR("comparison", "whether hosts differ in this cell's rate"),
    "more_needed": nul("integer", "clean attempts more that would call it fixed"),
    "advice": nul("string", "how many more clean attempts would make it fixed, or why none would"),
    "worst_case": nul("string", "the verdict if every error/hang in the phase at risk had reproduced"),
    "stopped": A(S("stopped by RULE after n attempts on HOST"), "where a stop rule ended this cell"),
    "approximate": B("its fixed-n intervals are not valid at this look"),
    "anytime": B("its numbers are anytime-valid (this look is not the planned end)"),
    "look": A(S("reason"), "why this look is not the planned end"),
    "splits": A(R("split"), "rates in two groups of the cell's own attempts")},
    required=["cell", "cell_id", "verdict", "text", "reference", "reproductions", "judged", "excluded", "hosts",
              "rate", "against_reference", "anytime"])
JUDGING = O("How attempts are judged (the campaigns' manifests)", {
    "reproductions": A(OUTCOME, "outcomes that count as a reproduction"),
    "at_risk_phase": nul("string", "the vLLM phase at risk"),
    "max_excluded_share": N("largest share of excluded attempts a verdict accepts"),
    "fixed_ratio": N("rate ratio below which a cell is called fixed"),
    "early_reproductions": S("how reproductions before the phase at risk count")})
JUDGEMENT_PROPS = {
    "reference": S("the reference cell"), "judging": R("judging", "how attempts are judged"),
    "hosts": A(S("host"), "every host with records"), "attempts": I("attempts pooled", minimum=0),
    "excluded": M(I("count"), "attempts left out of rates, by reason"),
    "not_run": M(I("count"), "slots that run again, by reason"), "warnings": A(S("warning"), "the report's warnings"),
    "verdicts": A(R("verdict"), "one verdict per cell")}
JUDGEMENT = O("The verdicts of pooled records, as invoke report --json gives them", JUDGEMENT_PROPS)
VERDICT_DEFS = {"interval": INTERVAL, "comparison": COMPARISON, "split": SPLIT, "verdict": VERDICT,
                "judging": JUDGING, "judgement": JUDGEMENT}

RATE = O("A cell's count and rate on one host, or pooled over its hosts (host null)", {
    "cell": S("cell display name"), "cell_id": S("cell identity"), "host": nul("string", "host; null: all hosts pooled"),
    "reference": B("the reference cell"), "reproductions": I("reproductions", minimum=0),
    "judged": I("attempts in the rate", minimum=0), "clean": I("clean attempts", minimum=0),
    "at_risk": I("errors/hangs in the phase at risk", minimum=0), "excluded": I("excluded", minimum=0),
    "not_run": I("slots that run again", minimum=0), "early": I("early reproductions", minimum=0),
    "outcomes": COUNTS("attempts by outcome (slots that run again are in not_run, not here)"), "rate": nul("number", "reproductions / judged (null: none judged)"),
    "interval": NR("interval", "the rate's interval"), "approximate": B("a look before the planned end"),
    "mix": B("pooled over hosts that differ: this fleet's mix, not one rate")})

WRITTEN: dict[str, str] = {}


def schema(name: str, title: str, description: str, body: dict[str, Any], defs: dict[str, Any] | None = None) -> None:
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": BASE + f"{name}.schema.json",
           "title": title, "description": description, **body}
    if defs: out["$defs"] = copy.deepcopy(defs)
    WRITTEN[f"{name}.schema.json"] = json.dumps(out, indent=2, ensure_ascii=False) + "\n"

JSON_LINES = " JSON lines: one object per line, one line per host; this schema is one line."
ONE_DOC = " One JSON document on stdout."

# report
schema("report", "invoke report --json", "The pooled verdicts and each cell's rate per host and pooled." + ONE_DOC,
       {"type": "object", "properties": {**JUDGEMENT_PROPS, "rates": A(R("rate"), "one entry per (cell, host) and per cell pooled"),
                                         "audit": O("with --audit: every claim re-checked against the raw records by code that "
                                                    "does not import the judge (src/reprofleet/audit/)", {
                                             "claims": I("claims checked", minimum=0),
                                             "attempts": I("attempts read", minimum=0),
                                             "contradictions": A(O("A claim its own records contradict", {
                                                 "claim": S("the claim, as the report names it"),
                                                 "shown": S("what the records show"),
                                                 "item": I("the item of issue 33 whose rule it breaks")}),
                                                 "one per contradiction (none: the report stands)")})},
        "required": list(JUDGEMENT_PROPS) + ["rates"]}, {**VERDICT_DEFS, "rate": RATE})

# compare
SIDE = O("One side of the comparison", {"label": S("the side's name (a path, campaign, controller, host or group)"),
          "judgement": R("judgement", "this side's verdicts, Holm-adjusted across the whole comparison"),
          "alone": NR("judgement", "this side judged on its own, as invoke report would")})
EFFECT = O("Whether one cell's effect against the reference differs between the sides", {
    "cell": S("cell"), "p_value": nul("number", "raw p-value (null: fewer than two sides say anything)"),
    "method": S("the test"), "tested": A(S("side"), "the sides in the test"),
    "left_out": A(O("a side left out", {"side": S("side"), "why": S("why")}), "sides that say nothing about the effect"),
    "p_adjusted": nul("number", "Holm-adjusted across the cells tested"), "differs": B("the effect differs between sides"),
    "text": S("the sentence")})
schema("compare", "invoke compare --json", "Sides compared over the same cells, every claim Holm-adjusted across sides x cells." + ONE_DOC,
       {"type": "object", "properties": {
           "by": S("what a side is", enum=["path", "campaign", "controller", "host", "group"]),
           "family": S("the Holm family, in words"), "comparisons": I("cell-against-reference comparisons, every side's"),
           "cells": I("cells compared on at least one side"), "host_pairs": I("'is X rarer than R' pairs of the host claims"),
           "hosts_differ": I("hosts-differ tests, every side's"), "sides": A(R("side"), "the sides", minItems=1),
           "pooled": NR("side", "--by host/group: every side's records as one report"),
           "effects": A(R("effect"), "--by host/group: one per cell compared on two sides or more")},
        "required": ["by", "family", "comparisons", "cells", "sides", "pooled", "effects"]},
       {**VERDICT_DEFS, "side": SIDE, "effect": EFFECT})

# status
HOST_STATE = O("One host's progress", {
    "name": S("host"), "done": I("attempts done", minimum=0), "planned": nul("integer", "attempts planned (null: unknown)"),
    "remaining": nul("integer", "slots left"), "outcomes": COUNTS("records by outcome (slots that run again included)"),
    "wedges": I("wedges", minimum=0), "power_cycles": I("power cycles", minimum=0),
    "quarantined": nul("string", "why it was quarantined (null: it was not)"),
    "needs_person": nul("string", "what a person must do (a host without a PDU)"),
    "seconds_per_slot": nul("number", "its own pace")})
schema("status", "invoke status --json",
       "A running or finished campaign's state read from its folder, with its verdicts so far." + ONE_DOC
       + " With --watch: JSON lines, one such document per refresh.",
       {"type": "object", "properties": {
           "campaign": S("campaign id"), "folder": S("the campaign folder"), "running": B("a controller runs it now"),
           "updated": nul("number", "unix time of the controller's last metrics.prom"), "cells": A(S("cell"), "the cells"),
           "attempts_per_cell": nul("integer", "attempts per cell per host"), "done": I("attempts done", minimum=0),
           "planned": nul("integer", "attempts planned"), "eta_s": nul("number", "seconds left (null: unknown or not running)"),
           "hosts": A(R("host"), "per host"), "stopped": A(O("a cell a stop rule ended on a host", {"host": S("host"), "cell": S("cell")}), "stopped cells"),
           "warnings": A(S("warning"), "what the folder reading warns about"), "read_at": N("unix time it was read"),
           "adaptive": nul("string", "search or bisect: its ladder chooses each slot at run time, so planned is null "
                                     "(null: a fixed plan)", enum=["search", "bisect", None]),
           "budget": nul("integer", "a search's or bisection's attempt budget (null: none stated, or a fixed plan)"),
           "controller": S("running, finished or unknown, in words"),
           "anytime": B("some verdict's numbers are anytime-valid (the campaign is not at its planned end)"),
           "verdicts": A(R("verdict"), "verdicts so far")},
        "required": ["campaign", "folder", "running", "cells", "done", "planned", "hosts", "read_at", "controller",
                     "anytime", "verdicts"]},
       {**VERDICT_DEFS, "host": HOST_STATE})

# campaign
PLAN = O("The campaign's plan, as the dry run prints it (contacts nothing)", {
    "campaign": S("campaign id"), "playbook": S("playbook file"), "playbook_name": S("the playbook's name"),
    "hosts": A(O("a host", {"name": S("inventory name"), "address": S("address"), "port": I("SSH port")}), "hosts chosen"),
    "env": M({}, "environment every cell shares"), "args": M({}, "PoC arguments every cell shares"),
    "cells": A(O("a cell", {"name": S("cell"), "gpu": M({}, "GPU settings it asks ({}: defaults)"),
                            "runtime": S("its runtime, in words"), "stop_rule": S("fixed_n, first_reproduction or sprt"),
                            "reference": B("the reference cell"), "env": M({}, "its own environment"),
                            "args": M({}, "its own PoC arguments")}), "the cells"),
    "attempts_per_cell": I("attempts per cell per host"), "order": S("the playbook's order"),
    "planned": M(I("attempts", minimum=0), "attempts planned per host"), "total_attempts": I("attempts planned", minimum=0),
    "stop_rules_may_end_early": B("a cell with a stop rule may end early (planned counts are then at most)"),
    "attempt_timeout_s": N("the playbook's attempt timeout"),
    "duration_upper_s": N("wall time if every attempt ran to its timeout, plus power cycles and boots not counted"),
    "refusals": A(S("line"), "cells an observe-only host refuses"), "transfer": A(S("line"), "what travels to each host")})
RESULT = O("How the campaign ended", {
    "campaign": S("campaign id"), "folder": S("campaign folder"), "records": S("its attempts.jsonl"),
    "attempts": I("records written", minimum=0), "stopped_by_signal": B("interrupted by a signal (--resume goes on)"),
    "failure": nul("string", "why the campaign stopped on its own"),
    "quarantined": M(S("why"), "host -> why it was quarantined"),
    "unjudged": A(S("cell"), "cells with no judged attempt on any host"),
    "given_back": M(S("what it got back, in words"), "host -> what it got back at the end (GPU settings restored or not, and why)")})
EXIT = I("the task's exit status (README, Exit status): 0 ok, 1 error, 2 bad input, 3 a host failed, 4 a cell not judged, 130 interrupted",
         enum=[0, 1, 2, 3, 4, 130])
RAN = {"type": "object", "description": "invoke campaign --json, after the campaign", "properties": {
    "dry_run": {"const": False, "description": "the campaign ran"}, "exit_status": EXIT,
    "result": R("result", "how the campaign ended"), "report": S("report.md"),
    "html": nul("string", "report.html (null: not written)"),
    "judgement": NR("judgement", "the verdicts (null: no attempt was recorded)")},
    "required": ["dry_run", "exit_status", "result", "report", "html", "judgement"]}
schema("campaign", "invoke campaign --json",
       "At the end of a campaign: how it ended and its verdicts; with --dry-run: the hosts chosen and the plan "
       "(with --check-hosts: each host's answer). The live view, tables and warnings go to stderr." + ONE_DOC,
       {"oneOf": [
           {"type": "object", "description": "invoke campaign --dry-run --json", "properties": {
               "dry_run": {"const": True, "description": "a dry run: nothing was contacted (but --check-hosts)"},
               "exit_status": EXIT,
               "chosen": O("which hosts the playbook's hosts: and --limit chose", {
                   "inventory": S("the inventory source"), "of": I("hosts in the inventory"),
                   "chosen": A(S("host"), "hosts chosen"), "playbook_hosts": nul("string", "the playbook's hosts: pattern"),
                   "limit": nul("string", "--limit pattern")}),
               "plan": R("plan", "the plan, as the dry run prints it"),
               "readiness": {"description": "--check-hosts: whether every host can run its plan (null without it)",
                             "anyOf": [{"type": "null"}, O("the hosts' answers", {"ready": B("every host can run its plan"),
                                                                                 "lines": A(S("host: ready, or what it lacks"), "one line per host")})]}},
            "required": ["dry_run", "exit_status", "chosen", "plan", "readiness"]},
           RAN]},
       {**VERDICT_DEFS, "plan": PLAN, "result": RESULT})

schema("demo", "invoke demo --json",
       "The demo's campaign on its simulated fleet, as invoke campaign --json gives it after a campaign; the live "
       "view and tables go to stderr." + ONE_DOC,
       {k: copy.deepcopy(v) for k, v in RAN.items() if k != "description"}, {**VERDICT_DEFS, "result": RESULT})

# plan
SPAN = O("a range (low = high when it is one number)", {"low": N("kindest case"), "high": N("harshest case")})
CHANCE = O("a probability counted over simulated campaigns", {"p": N("the share", minimum=0, maximum=1),
          "half_width": N("its 95% half-width"), "campaigns": I("simulated campaigns", minimum=2)})
schema("plan", "invoke plan --json",
       "What ruling out a rate costs (mode baseline), or a campaign's length, power cycles and what its verdicts "
       "can show (mode campaign), or what a search or bisection spends beside a full grid and a fixed-run rule (mode search, bisect)." + ONE_DOC,
       {"oneOf": [
           {"type": "object", "description": "invoke plan --baseline RATE --json", "properties": {
               "mode": {"const": "baseline", "description": "--baseline"}, "baseline": N("the rate to rule out"),
               "confidence": N("level of the clean-run bound"), "clean_attempts": I("clean attempts in a row that rule it out"),
               "sprt": O("the SPRT of p0 (still reproduces) against p1 (fixed)", {
                   "p0": N("still reproduces"), "p1": N("fixed"), "alpha": N("chance of a false 'fixed'"),
                   "beta": N("chance of a false 'still reproduces'"), "cap": I("at most this many attempts"),
                   "exact_if_reproduces": N("average attempts at p0 (exact, overshoot and cap included)"),
                   "exact_if_fixed": N("average attempts at p1"), "wald_if_reproduces": N("Wald's approximation at p0"),
                   "wald_if_fixed": N("Wald's approximation at p1")}),
               "fixed_n": I("attempts a fixed-n exact test with the same error rates runs")},
            "required": ["mode", "baseline", "confidence", "clean_attempts", "sprt", "fixed_n"]},
           {"type": "object", "description": "invoke plan -i INVENTORY -p PLAYBOOK --json", "properties": {
               "mode": {"const": "campaign", "description": "--hosts and --playbook"},
               "estimate": O("length and power cycles, per host (hosts run in parallel)", {
                   "playbook": S("playbook name"), "hosts": A(S("host"), "hosts"), "baseline": N("the rate assumed"),
                   "cells": A(O("one cell on one host", {"cell": S("cell"), "stop_rule": S("its stop rule"),
                                                          "slots": I("slots"), "attempts": R("span", "expected attempts"),
                                                          "reproductions_at_baseline": N("expected reproductions at the baseline"),
                                                          "reference": B("the reference cell"),
                                                          "if_reproduces": _course("if it reproduces at the baseline, like the reference"),
                                                          "if_fixed": _course("if it is truly fixed (rate 0)")}), "per cell"),
                   "slots": I("slots per host"), "attempts": R("span", "expected attempts per host"),
                   "attempt_s": N("seconds per attempt"), "attempt_s_is_timeout": B("attempt_s is the playbook's timeout (an upper bound)"),
                   "dwell_s": N("seconds off in a power cycle"), "boot_s": N("the boot timeout (an upper bound)"),
                   "cycle_s": N("seconds per power cycle"), "power_cycles": R("span", "power cycles per host"),
                   "duration_s": R("span", "expected seconds per host"),
                   "power_cycle_budget": nul("integer", "power_cycle_budget of invoke.yaml"),
                   "over_budget": B("more power cycles than the budget may be needed"),
                   "if_reproduces": _scenario("every compared cell reproduces at the baseline"),
                   "if_fixed": _scenario("every compared cell is truly fixed")}),
               "verdicts": O("what the verdicts can show, from campaigns simulated and judged by the real judge", {
                   "playbook": S("playbook name"), "hosts": A(S("host"), "hosts"), "baseline": N("the reference's rate"),
                   "attempts": I("attempts per cell and host"), "compared": I("cells compared with the reference (one Holm family)"),
                   "fixed_ratio": N("the playbook's fixed_ratio"), "rules": A(S("stop rule"), "the compared cells' stop rules"),
                   "seed": I("the simulation's seed"), "fixed": R("chance", "P(called fixed | the cell's rate is 0)"),
                   "false_fixed": A({"allOf": [R("chance")], "type": "object", "required": ["ratio"],
                                     "properties": {"ratio": N("rate ratio cell / reference")},
                                     "description": "P(called fixed | the cell reproduces at ratio x baseline)"}, "per ratio"),
                   "power": A(O("the fewest attempts for a power goal", {"goal": N("power goal"),
                                 "attempts": nul("integer", "attempts per cell and host (null: not reached by max_planned)"),
                                 "chance": NR("chance", "the simulated power there")}), "per goal"),
                   "max_planned": I("attempts per cell and host the power search goes up to")})},
            "required": ["mode", "estimate", "verdicts"]},
           {"type": "object", "description": "invoke plan -p PLAYBOOK [--truth ...] --json, the playbook holding search: or bisect:",
            "properties": {
               "mode": S("search or bisect", enum=["search", "bisect"]), "runs": I("simulated runs per truth", minimum=1),
               "hosts": nul("integer", "hosts probing in parallel (null: one host)"),
               "truths": A(O("one true curve and what each design spent against it", {
                   "p": A(N("P(reproduction)", minimum=0, maximum=1), "per level, safest (or oldest) first"),
                   "words": S("the truth as stated"),
                   "designs": A(O("one design's figures over the simulated runs", {
                       "design": S("ours, grid (each level to its own bound) or fixed (N runs a point, any wedge is bad)"),
                       "mean_attempts": N("attempts, mean"), "p90_attempts": N("attempts, 90th percentile"),
                       "mean_power_cycles": N("power cycles, mean"), "p90_power_cycles": N("power cycles, 90th percentile"),
                       "share_meets": N("search: the answer truly meets the target; bisection: the true change point found",
                                        minimum=0, maximum=1),
                       "share_within_one": N("search: and at most one level below the best; bisection: off by at most one",
                                             minimum=0, maximum=1)}), "ours first, then the baselines")}), "one per --truth")},
            "required": ["mode", "runs", "hosts", "truths"]}]},
       {"span": SPAN, "chance": CHANCE})

# power
schema("power", "invoke power --json", "One host's power action: the state read back, or (verify) what the wiring check saw." + ONE_DOC,
       {"oneOf": [
           O("on, off, status or cycle", {"host": S("host"), "action": S("the action", enum=["on", "off", "status", "cycle"]),
                                          "state": S("the state the device reads back (unknown: its outlets disagree)",
                                                     enum=["on", "off", "unknown"]), "ok": {"const": True, "description": "the action was done"}}),
           O("verify: off, this host and no other goes silent, on, it boots", {
               "host": S("host"), "action": {"const": "verify", "description": "verify"},
               "ok": B("wiring confirmed"), "silent_after_s": nul("number", "seconds until it stopped answering (null: never)"),
               "back_after_s": nul("number", "seconds until it answered again (null: not within the boot deadline)"),
               "others_silent": A(S("host"), "other hosts that went silent: that outlet feeds them"),
               "not_checked": A(S("host"), "hosts that did not answer before"), "lines": A(S("line"), "what the text says")})]})

# policy
schema("policy", "invoke policy --json", "What each host's GPU policy and lockup sysctls read (after --restore: read back)." + JSON_LINES,
       O("one host", {"host": S("host"), "action": S("read or restore", enum=["read", "restore"]),
                      "ok": B("the host answered"),
                      "policy": {"description": "what the GPU and sysctls read (null: the host could not say)",
                                 "anyOf": [{"type": "object", "properties": {"host_debug": M({}, "lockup-to-panic sysctls")}},
                                           {"type": "null"}]},
                      "error": nul("string", "why the host could not say (null: it answered)")}))

# cache
schema("cache.push", "invoke cache.push --json", "A snapshot pushed to every host." + JSON_LINES,
       {"oneOf": [
           O("pushed", {"host": S("host"), "ok": {"const": True, "description": "pushed"}, "snapshot": S("snapshot hash"),
                        "already_there": B("the host had every object"), "sent_objects": I("objects sent", minimum=0),
                        "sent_bytes": I("bytes sent", minimum=0), "seconds": N("seconds"), "via": S("ssh or paramiko")}),
           O("not pushed", {"host": S("host"), "ok": {"const": False, "description": "not pushed"}, "error": S("why")})]})
schema("cache.pull", "invoke cache.pull --json", "A host's cache harvested as a snapshot." + ONE_DOC,
       O("the snapshot", {"host": S("host"), "remote": S("the folder on the host"), "folder": S("the snapshot folder here"),
                          "files": I("files", minimum=0), "bytes": I("bytes", minimum=0), "snapshot": S("snapshot hash"),
                          "manifest": S("the manifest file")}))

# export
schema("export", "invoke export --out FILE --json", "What export wrote (needs --out: stdout carries the rows otherwise)." + ONE_DOC,
       O("what was written", {"format": S("the format", enum=["csv", "parquet", "jsonl"]), "out": S("the file written"),
                              "attempts": I("rows: one per attempt, amendments folded", minimum=0),
                              "outcomes": COUNTS("rows written by outcome"),
                              "columns_leading": A(S("column"), "the columns every row has, in order"),
                              "sources": A(S("path"), "folders or attempts files read")}))

# sim.status
schema("sim.status", "invoke sim.status --json", "The simulated fleet's hosts." + JSON_LINES,
       O("one simulated host", {"name": S("host"), "address": S("its address"), "power": S("on, off or unknown"),
                                "frozen": B("wedged"), "stalled": B("stalled"), "boot_id": nul("string", "boot id"),
                                "sshd_pid": nul("integer", "its sshd"), "gpu_policy": M({}, "the simulated card's settings"),
                                "susceptible": B("it can wedge"), "p_wedge": N("chance of a wedge per attempt")}))

# doctor
DOCTOR_CHECKS = A(O("one item", {"item": S("what is checked (login, privilege, driver, docker ...)"),
                                  "status": S("ok, missing (not ready), warn (less evidence) or unknown",
                                              enum=["ok", "missing", "warn", "unknown"]),
                                  "found": S("what the host has"), "fix": S("the line to fix it (empty when ok)")}),
                  "the items")
schema("doctor", "invoke doctor --json", "Per host, each item its plan needs, whether it is there, and the fix; with "
       "--cycle, each chosen host's supervised power cycle (campaign/cycle_test.py)." + JSON_LINES,
       {"oneOf": [
           O("one host", {"host": S("host"), "ready": B("no item is missing"), "checks": DOCTOR_CHECKS}),
           {**O("--cycle: one host's test cycle, or why it was refused before anything was switched", {
               "host": S("host"), "cycle": B("true: a --cycle line", const=True),
               "ok": B("not refused, and no item is missing"),
               "refused": nul("string", "why the host was not switched (held by a campaign, not seen alive, no pdu:)"),
               "switched": B("its outlets were switched (off, then always on)"),
               "off_state": nul("string", "the outlets read back after off"),
               "on_state": nul("string", "the outlets read back after on"),
               "dark_after_s": nul("number", "seconds from the outlets reading off to the host answering nothing (null: never)"),
               "others_dark": A(S("host"), "other hosts of the inventory that went dark with it: that outlet feeds them"),
               "not_watched": A(S("host"), "other hosts that did not answer before: nothing learnt of them"),
               "sshd_after_on_s": nul("number", "seconds from on to sshd answering (null: not within timeouts.boot)"),
               "off_to_sshd_s": nul("number", "seconds from off to sshd answering"),
               "suggested_boot_s": nul("integer", "a timeouts.boot for this host: twice off -> sshd, rounded up to 30 s, at least 120 s"),
               "boot_before": nul("string", "boot_id before the cycle"),
               "boot_after": nul("string", "boot_id after it (a new one: the host lost power)"),
               "checks": DOCTOR_CHECKS}), "not": {"required": ["ready"]}}]})

# facts
schema("facts", "invoke facts --json", "Each host's facts as its agent reports them (GPU, driver, OS, BIOS, boot_id), or why it could not be asked; with --bug-report, each host's archive." + JSON_LINES,
       {"oneOf": [
           {"type": "object", "description": "a host that could not be asked",
            "properties": {"host": S("host"), "error": S("why")}, "required": ["host", "error"], "additionalProperties": False},
           {"type": "object", "description": "a host's facts (the agent's keys; more may follow)",
            "properties": {"host": S("host"), "hostname": S("its hostname"), "kernel": S("kernel release"),
                           "boot_id": S("the boot id"), "driver_version": nul("string", "NVIDIA driver"),
                           "gpus": A({"type": "object"}, "the GPUs"), "journal_persistent": nul("boolean", "journald keeps old boots")},
            "required": ["host"], "not": {"anyOf": [{"required": ["error"]}, {"required": ["status"]}]}},
           {"type": "object", "description": "invoke facts --bug-report --json: one host's nvidia-bug-report.sh archive, or why there is none",
            "properties": {"host": S("host"),
                           "status": S("fetched, absent (no nvidia-bug-report.sh on the host) or failed",
                                       enum=["fetched", "absent", "failed"]),
                           "path": nul("string", "where the archive now lies on the controller"),
                           "size": nul("integer", "its bytes"), "sha256": nul("string", "sha256 of the bytes written"),
                           "detail": S("what happened"), "fix": nul("string", "what to do about it")},
            "required": ["host", "status", "path", "size", "sha256", "detail", "fix"], "additionalProperties": False}]})


# records/attempt: one line of attempts.jsonl (src/reprofleet/model/records.py, Record; amendments:
# records/store.py, CampaignLog.amend); tests/unit/test_attempt_schema.py holds the two to the same fields
ATTEMPT_REQUIRED = {
    "campaign": S("the campaign's id (its folder's name)"),
    "attempt": S("the attempt's id, unique in the campaign"),
    "controller": S("the controller that ran it (a name, or shard i of N, slurm job J)"),
    "host": S("the inventory name of the host"),
    "cell": S("the cell's name in the playbook's matrix"),
    "factors": {"type": "object", "description": "what the cell asked for: its resolved factors (clock lock, power limit, spec tokens, vLLM ...)"},
    "policy": nul("object", "the GPU settings read back before the attempt (null: not read: observe-only, or no GPU answer)"),
    "runtime": {"type": "object", "description": "what ran the PoC: kind (docker, venv, python), image and its digest or id, interpreter and package versions"},
    "cache": nul("string", "the cache mode (fresh, seeded, persistent, harvest)"),
    "attempt_index": I("the slot's index among the cell's attempts on this host", minimum=0),
    "attempt_in_boot": I("attempts run on this host since its boot, this one included", minimum=0),
    "cold_boot": B("the first attempt after a boot"),
    "boot_id": nul("string", "the host's boot_id when the attempt started"),
    "started": S("when it started (ISO 8601 UTC, the controller's clock)"),
    "ended": S("when it ended (ISO 8601 UTC, the controller's clock)"),
    "outcome": OUTCOME,
    "schema": I("the record schema's version", minimum=1),
}
ATTEMPT_OPTIONAL = {
    "reason": S("the outcome's reason in words (empty for clean)"),
    "exit_code": nul("integer", "the PoC's exit status, where it exited"),
    "detect_latency_s": nul("number", "seconds from the last line heard to the wedge being declared"),
    "last_heartbeat": nul("string", "when the last line (heartbeats included) was heard from the host"),
    "wedge_declared": nul("string", "when the host was declared wedged"),
    "last_phase": nul("string", "the last vLLM engine-start phase entered"),
    "phases": nul("array", "every phase entered, in order", items=S("a phase")),
    "phase_note": nul("string", "where the log cannot tell before or inside the phase at risk (after kernel warmup; capture starts next)"),
    "last_log_line": nul("string", "the last line the PoC printed (host text, bounded)"),
    "telemetry": nul("object", "GPU samples before the end (clock, power, temperature ...)"),
    "forensics": nul("object", "what was found after a wedge or reboot: kernel lines, Xids, BMC events, recovery rung, vmcore ..."),
    "facts": nul("string", "sha256 of the host's facts snapshot (facts/<host>.json, facts/by-hash/)"),
    "stream": nul("string", "the attempt's stream file, relative to the campaign folder"),
    "poc": nul("string", "sha256 of the PoC script that ran"),
    "cell_id": nul("string", "the cell's identity: a hash of its resolved factors, runtime and PoC"),
    "cache_snapshot": nul("string", "seeded: the manifest hash of the snapshot the attempt started from"),
    "host_debug": nul("object", "kernel sysctls read back (a host_debug cell)"),
    "kernel_net": nul("array", "netconsole: the last kernel lines heard over the network",
                      items=O("one line", {"t": N("when it was heard (seconds)"), "line": S("the kernel line")}, required=[])),
    "forged_lines": I("stream lines without the attempt's MAC (the PoC's own writes): ignored, counted", minimum=0),
}
schema("records/attempt", "one line of attempts.jsonl",
       "One attempt's record as the controller appends it to <campaign>/attempts.jsonl, or an amendment to one "
       "(what was learnt after it was written: readers fold it into the record it names). More keys are allowed: "
       "a later schema version may add fields.",
       {"oneOf": [
           {"type": "object", "description": "an attempt's record",
            "properties": {**ATTEMPT_REQUIRED, **ATTEMPT_OPTIONAL}, "required": list(ATTEMPT_REQUIRED),
            "not": {"required": ["amends"]}},
           {"type": "object", "description": "an amendment of a recorded attempt",
            "properties": {"amends": S("the attempt id it completes"), "amended": S("when (ISO 8601 UTC)"),
                           "schema": I("the record schema's version", minimum=1)},
            "required": ["amends", "amended", "schema"]}]})


def main(out: Path = OUT) -> None:
    for name, text in WRITTEN.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
