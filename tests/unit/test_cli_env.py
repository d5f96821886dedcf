"""INVOKE_REPROFLEET_* variables mean what they say (``false`` is false, ``2.5`` is 2.5, nonsense
is one line naming the variable), and ``reprofleet ...`` reads the same invoke.yaml as ``invoke ...``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from reprofleet.cli.env_config import normalise_environment, parse_typed
from reprofleet.cli.tasks import DEFAULTS
from tests.support.fleet_campaign import write_playbook
from tests.support.paths import REPO


def invoke_config(environ: dict[str, str]) -> Any:
    """The configuration Invoke itself builds for this project, after our normalising."""
    from invoke import Config

    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(environ)
        assert normalise_environment(DEFAULTS) == []
        config = Config(project_location=str(REPO))
        config.load_project()
        config.load_shell_env()
        return config
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize("text, meant", [("false", False), ("no", False), ("0", False), ("off", False),
                                         ("true", True), ("yes", True), ("1", True), ("On", True)])
def test_a_boolean_variable_means_its_word(text: str, meant: bool) -> None:
    config = invoke_config({"INVOKE_REPROFLEET_ACCEPT_NEW_HOST_KEYS": text})
    assert config.reprofleet.accept_new_host_keys is meant


def test_a_fractional_number_over_a_whole_one_in_invoke_yaml_is_that_number() -> None:
    assert invoke_config({"INVOKE_REPROFLEET_SILENCE_S": "2.5"}).reprofleet.silence_s == 2.5


@pytest.mark.parametrize("key, text, words", [
    ("accept_new_host_keys", "maybe", "is not a boolean"), ("dead_rounds", "2.5", "is not a whole number"),
    ("silence_s", "soon", "is not a number"), ("silence_s", "nan", "is not a finite number"),
])
def test_nonsense_is_refused_naming_the_variable(key: str, text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_typed(f"INVOKE_REPROFLEET_{key.upper()}", text, DEFAULTS[key])
    environ = {f"INVOKE_REPROFLEET_{key.upper()}": text}
    (line,) = normalise_environment(DEFAULTS, environ)
    assert line.startswith(f"INVOKE_REPROFLEET_{key.upper()}={text!r} {words}")
    assert environ == {}  # taken out: Invoke never casts it


def test_invoke_yaml_writes_each_setting_in_the_type_of_its_default() -> None:
    """Invoke casts a variable to the type already configured: a whole number in invoke.yaml
    would make ..._SILENCE_S=2.5 a traceback inside Invoke."""
    written = yaml.safe_load((REPO / "invoke.yaml").read_text())["reprofleet"]
    mismatched = {k: (type(v).__name__, type(DEFAULTS[k]).__name__) for k, v in written.items()
                  if k in DEFAULTS and DEFAULTS[k] is not None and type(v) is not type(DEFAULTS[k])}
    assert mismatched == {}


def test_a_task_with_a_variable_that_does_not_parse_runs_nothing_and_says_one_line(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n")
    book = write_playbook(tmp_path / "book", attempts=1)
    result = subprocess.run([sys.executable, "-m", "reprofleet", "campaign", "--hosts", str(inventory), "--playbook",
                             str(book)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "INVOKE_REPROFLEET_DEAD_ROUNDS": "2.5"})
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "INVOKE_REPROFLEET_DEAD_ROUNDS='2.5' is not a whole number" in line
    assert not (tmp_path / "reports").exists()


def test_the_console_script_reads_the_project_invoke_yaml(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    ws01:\n      ansible_host: 10.213.254.254\n")
    book = write_playbook(tmp_path / "book", attempts=2,
                          cells="  - name: default\n  - name: lgc\n    graphics_clocks: [180, 2800]\n")

    def plan_text(folder: Path) -> str:
        folder.mkdir(exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "reprofleet", "plan", "--hosts", str(inventory), "--playbook",
                               str(book), "--campaigns", "4"], cwd=folder, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    plain = plan_text(tmp_path / "plain")
    project = tmp_path / "project"
    (project / "deeper").mkdir(parents=True)
    (project / "invoke.yaml").write_text("reprofleet:\n  power_cycle_budget: 1\n  dwell_s: 900.0\n")
    assert plan_text(project / "deeper") != plain  # found from a subfolder, as invoke finds tasks.py
