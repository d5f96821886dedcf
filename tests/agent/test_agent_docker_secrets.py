"""A docker attempt's secrets reach docker by a 0600 ``--env-file`` that is gone once the
container exists, never the docker client's environment or argv (issue 34 item 8). Run
locally against a stand-in ``docker`` that reports what it was given."""

from __future__ import annotations

import json
import os
import stat
import textwrap
from pathlib import Path
from typing import Any

from tests.support import agent_harness as h

SECRET = "hf-secret-value-0123"

FAKE_DOCKER = textwrap.dedent('''\
    #!{python}
    import json, os, sys, time
    args, marker = sys.argv[1:], os.environ["FAKE_DOCKER_MADE"]
    if args[:2] == ["container", "inspect"]:
        sys.exit(0 if os.path.exists(marker) else 1)
    if args[:1] == ["kill"]:
        sys.stderr.write("Error response from daemon: No such container\\n")
        sys.exit(1)
    path = args[args.index("--env-file") + 1]
    pairs = dict(line.rstrip("\\n").split("=", 1) for line in open(path))
    print(json.dumps({{"mode": os.stat(path).st_mode & 0o777, "names": sorted(pairs),
                      "value_given": pairs.get("HF_TOKEN") == {secret!r},
                      "client_env": "HF_TOKEN" in os.environ, "argv": args}}), flush=True)
    open(marker, "w").close()  # docker made the container
    deadline = time.time() + 10
    while os.path.exists(path) and time.time() < deadline:
        time.sleep(0.05)
    print(json.dumps({{"file_gone": not os.path.exists(path)}}), flush=True)
    ''')


def test_a_docker_attempts_secret_goes_by_a_private_env_file_removed_once_the_container_exists(
        state_dir: Path, tmp_path_factory: Any) -> None:
    import sys

    tools = tmp_path_factory.mktemp("tools")  # outside the state dir, whose every file is searched for the secret
    bin_dir = tools / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(FAKE_DOCKER.format(python=sys.executable, secret=SECRET))
    docker.chmod(docker.stat().st_mode | stat.S_IXUSR)
    env = h.agent_env({"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                       "FAKE_DOCKER_MADE": str(tools / "made")})
    rc, lines, err = h.run_agent(state_dir, "run", "--id", "d1", "--timeout", "30", "--sample-hz", "0", "--kmsg", "",
                                 "--secrets-stdin", "--container", "reprofleet-d1", "--",
                                 "docker", "run", "--rm", "--name", "reprofleet-d1", "--env", "HF_TOKEN",
                                 "--env", "PLAIN=1", "img", env=env, stdin=json.dumps({"HF_TOKEN": SECRET}).encode())
    said = [json.loads(e["line"]) for e in lines if e.get("k") == "log" and str(e.get("line", "")).startswith("{")]
    assert rc == 0 and len(said) == 2, (lines, err)
    given, after = said
    assert given["mode"] == 0o600 and given["names"] == ["HF_TOKEN"] and given["value_given"]
    assert not given["client_env"] and SECRET not in json.dumps(given["argv"])
    assert "--env-file" in given["argv"] and ["--env", "PLAIN=1"] == given["argv"][given["argv"].index("PLAIN=1") - 1:
                                                                                   given["argv"].index("PLAIN=1") + 1]
    assert after["file_gone"]  # removed once the container existed, while the attempt still ran
    assert not any(SECRET.encode() in p.read_bytes() for p in state_dir.rglob("*") if p.is_file())


def test_the_env_file_of_an_attempt_whose_supervisor_is_gone_is_swept_by_the_next_postboot(tmp_path: Path) -> None:
    """A host that froze under a docker attempt keeps its secrets' file on disk: no supervisor
    of that boot will remove it. The next postboot (after the power cycle) does."""
    state_dir = tmp_path / "state"
    attempt = state_dir / "attempts" / "frozen1"
    attempt.mkdir(parents=True)
    (attempt / "meta.json").write_text(json.dumps({"id": "frozen1", "boot_id": "an-earlier-boot"}))
    (attempt / "secrets.env").write_text("HF_TOKEN=hf-left-behind\n")
    h.run_agent(state_dir, "postboot", "--pstore", str(tmp_path / "no-pstore"))
    assert not (attempt / "secrets.env").exists()
