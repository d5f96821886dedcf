"""attempts.jsonl's published schema (docs/schema/records/attempt.schema.json) says what the
controller writes: every field of model/records.py's Record, the ones without a default required,
and amendment lines; what it refuses is named by path. (Every fleet and seam test's own records
are checked against it when the test ends: tests/conftest.py, tests/support/record_schema.py.)"""

from __future__ import annotations

import dataclasses
import json

from reprofleet.model import Outcome, Record
from tests.support.paths import REPO
from tests.support.record_schema import SCHEMA, invalid_lines, problems

RECORD, AMENDMENT = json.loads(SCHEMA.read_text())["oneOf"]


def a_record(**changes: object) -> dict:
    record = Record(campaign="c1", attempt="c1-ws01-0", controller="ctl", host="ws01", cell="default", factors={},
                    policy=None, runtime={"kind": "docker"}, cache=None, attempt_index=0, attempt_in_boot=1,
                    cold_boot=True, boot_id="b1", started="2026-12-07T03:00:00Z", ended="2026-12-07T03:01:00Z",
                    outcome=Outcome.WEDGE, phases=("engine_init", "cuda_graph_capture"),
                    kernel_net=({"t": 1.5, "line": "NVRM: Xid 79"},))
    return json.loads(json.dumps({**record.to_json(), **changes}))  # as attempts.jsonl holds it


def test_the_schema_names_every_field_a_record_has_and_requires_those_without_a_default() -> None:
    fields = dataclasses.fields(Record)
    assert set(RECORD["properties"]) == {f.name for f in fields}
    no_default = {f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert set(RECORD["required"]) == no_default | {"schema"}
    assert RECORD["properties"]["outcome"]["enum"] == [o.value for o in Outcome]


def test_a_record_as_the_controller_writes_it_and_an_amendment_are_valid() -> None:
    assert problems(a_record()) == []
    assert problems({"schema": 1, "amends": "c1-ws01-0", "amended": "2026-12-07T03:02:00Z", "forensics": {}}) == []


def test_what_the_schema_refuses_is_named_by_its_place() -> None:
    assert problems(a_record(outcome="froze")) and problems(a_record(attempt_index=-1))
    missing = a_record()
    del missing["boot_id"]
    assert problems(missing)
    assert problems(a_record(phases="capture"))  # a list, not a string


def test_the_committed_real_gpu_campaign_and_a_synthetic_one_match_the_schema(tmp_path) -> None:
    from tests.support import synthetic_campaign as synthetic

    assert list(invalid_lines(REPO / "tests" / "fixtures" / "real_gpu" / "campaign")) == []
    synthetic.write(tmp_path / "synthetic-1", synthetic.build(synthetic.Spec()))
    assert list(invalid_lines(tmp_path)) == []
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "attempts.jsonl").write_text(json.dumps(a_record(outcome="froze")) + "\n")
    (bad,) = invalid_lines(tmp_path / "bad")
    assert bad.endswith(":1: outcome: 'froze' is not one of ['clean', 'error', 'hang', 'wedge', 'reboot', 'power_loss', "
                        "'infra']"), bad
