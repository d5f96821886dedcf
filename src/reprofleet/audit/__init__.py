"""The auditor beside the judge: a report's claims re-checked against the raw records.

The judge (``verdicts/``, with ``stats/`` and ``model.judging``'s classification) turns
records into claims; the auditor reads the claims a report made (its ``--json`` document)
and the records it rests on, and re-derives each claim's preconditions with code of its own:
the hosts, versions and campaigns it covers, their counts and what they ran, the phase
roles in the worst case. It names every claim whose records contradict it.

"Does not import the judge" means, precisely: no module here imports ``reprofleet.verdicts``,
``reprofleet.stats``, ``reprofleet.model.judging``, ``reprofleet.model.phases``,
``reprofleet.playbook`` (the ladder's probe roles), ``reprofleet.records.pooling`` (which
carries each campaign's ``Judging``) or ``reprofleet.report``; ``lint-imports`` holds it
(direct imports: every typed record comes through ``reprofleet.model``, whose package loads
``model.judging``, so loading is allowed and *using* is not), and
``tests/unit/test_audit.py`` refuses any call of a record's ``classified`` or a judging's
``classify``/``role`` here. What the auditor takes from below is data, not decisions: the
typed record (``records/reader.py``), the cell identity's name (``records/identity.py``) and
the forensics' orderly shutdown (``model/shutdown.py``).

Modules: ``evidence`` (raw records -> what each attempt could mean), ``claims`` (a report's
structured claims), ``checks`` (one claim against the evidence -> contradictions), ``run``
(``audit_report``: the entry point, and ``REPROFLEET_AUDIT``).
"""
