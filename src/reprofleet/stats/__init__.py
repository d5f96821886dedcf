"""Pure numbers, no I/O: what the verdicts and the stop rules compute with.

Modules: ``intervals`` (exact intervals, Boschloo, Holm, the stratified test),
``conditional`` (exact conditional distributions over stacked 2x2 tables), ``ratio`` (the
common rate ratio's score bound), ``exact_ratio`` (its p-value at the "fixed" threshold made
exact, so "fixed at 95%" holds at every size), ``anytime`` (confidence sequences and e-processes, valid
at any look), ``comparison`` (a cell against the reference: the numbers verdicts and stop
rules both decide on), ``interaction`` (does a cell's effect differ between the sides of
``invoke compare``: the exact test of equal odds ratios), ``sprt``
(Wald's sequential test and the fixed-n design it is capped by), ``stop_rules`` (when a
cell may stop early, from counts), ``search_contract`` (the probes and results a boundary
search or a bisection exchanges with the runner and the report), ``boundary`` (the monotone
model over ordered levels and the next probe of a boundary search), ``changepoint`` (the
change-point posterior and the next version of a bisection), ``agreement`` (does one host's
own counts contradict its group's clean level), ``bisect_strata`` (which hosts a bisection's
answer rests on and covers).
"""
