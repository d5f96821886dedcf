"""Campaign folders as a first run leaves them, for the resume tests: the real pipeline
(``campaign/pipeline.py``) plans and writes ``campaign.json``; the hosts' part is left out
(:func:`manifest_only`) or played by fake hosts at the seam in virtual time (:func:`on_fakes`)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import pytest

from reprofleet.campaign import pipeline, run as run_mod
from reprofleet.campaign.run import CampaignPlan, CampaignResult
from reprofleet.campaign.settings import ControllerConfig
from reprofleet.cli.config import DEFAULTS
from reprofleet.clock import VirtualClock
from reprofleet.records.store import CampaignDir
from reprofleet.runner.recovery import recovery_factory
from tests.support.seam_host import FakeHost

POC_TEXT = "print('the reproducer')\n"
CELLS = "  - name: ref\n  - name: lgc\n    graphics_clocks: [180, 2800]\n"


def write_book(folder: Path, *, cells: str = CELLS, attempts: int = 2, poc: str = POC_TEXT, extra: str = "") -> Path:
    """A playbook beside its PoC (``poc.py``), docker cells as the fleet tests run them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "poc.py").write_text(poc)
    path = folder / "book.yml"
    path.write_text("name: resume-test\npoc: {script: poc.py}\n"
                    "runtime: {kind: docker, image: 'vllm/vllm-openai:v0.25.1'}\n"
                    f"attempts: {attempts}\ntimeouts: {{attempt: 30, boot: 60}}\norder: sequential\n{extra}"
                    "matrix:\n" + cells)
    return path


def write_inventory(folder: Path, hosts: Mapping[str, str] | None = None) -> Path:
    """Hosts by name and address (default: the fake host's ``h1`` at 192.0.2.10), no power port."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "hosts.yml"
    lines = ["all:", "  hosts:"]
    for name, address in (hosts or {"h1": "192.0.2.10"}).items():
        lines += [f"    {name}:", f"      ansible_host: {address}"]
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class QuietView:
    """The pipeline's view, its lines kept for the test (campaign/pipeline.py ``CampaignView``)."""

    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def text(self, text: str) -> None:
        self.lines.append(text)

    def refused(self, line: str) -> None:
        self.lines.append(line)

    def outlet_off(self, line: str) -> None:
        self.lines.append(line)

    def warning(self, line: str) -> None:
        self.warnings.append(line)

    @contextmanager
    def live(self, planned: Mapping[str, int | None], budget: int | None,
             stop: threading.Event) -> Iterator[Callable[..., None]]:
        yield lambda host, **fields: None


def request(inventory: Path, playbook: Path | None, reports: Path, *, resume: Path | None = None,
            changed: bool = False) -> pipeline.CampaignRequest:
    """What ``invoke campaign -i INVENTORY [-p PLAYBOOK] [--resume FOLDER] [--resume-changed]`` asks."""
    return pipeline.CampaignRequest(str(inventory), str(playbook) if playbook else None, ControllerConfig(dict(DEFAULTS)),
                                    reports, resume=resume, resume_changed=changed)


def manifest_only(monkeypatch: pytest.MonkeyPatch) -> list[CampaignPlan]:
    """The run replaced by what it does first (the folder and campaign.json, by the real writer);
    returns the plans it was given (none: nothing ran)."""
    ran: list[CampaignPlan] = []

    def run(plan: CampaignPlan, settings: Any, report_root: Path, **_: Any) -> CampaignResult:
        ran.append(plan)
        directory = CampaignDir(report_root / plan.campaign_id).create()
        run_mod.write_manifest(directory, plan, "pytest", run_mod.hashlib.sha256(
            Path(plan.playbook.poc.script).read_bytes()).hexdigest())
        return CampaignResult(plan.campaign_id, directory, (), False)

    monkeypatch.setattr(run_mod, "run_campaign", run)
    return ran


def on_fakes(monkeypatch: pytest.MonkeyPatch, fakes: Sequence[FakeHost], clock: VirtualClock) -> list[CampaignPlan]:
    """The real run, its hosts played by ``fakes`` in virtual time (one host per campaign: one timeline)."""
    real = run_mod.run_campaign
    by_name = {fake.name: fake for fake in fakes}
    ran: list[CampaignPlan] = []

    def run(plan: CampaignPlan, settings: Any, report_root: Path, **kwargs: Any) -> CampaignResult:
        ran.append(plan)
        kwargs.update(recovery_factory=recovery_factory, clock=clock, network_ok=lambda: True,
                      port_for=lambda ctx, host: by_name[host.name].port(ctx))
        return real(plan, settings, report_root, **kwargs)

    monkeypatch.setattr(run_mod, "run_campaign", run)
    return ran


def first_campaign(monkeypatch: pytest.MonkeyPatch, inventory: Path, playbook: Path, reports: Path) -> Path:
    """The folder a first run of ``playbook`` leaves (its campaign.json; no host was asked)."""
    manifest_only(monkeypatch)
    result = pipeline.run_or_plan(request(inventory, playbook, reports), QuietView())
    assert isinstance(result, CampaignResult)
    return result.directory.root


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes (what a refused resume must leave as it was)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
