"""The runner's decisions through the host seam, in virtual time: HostRunner and run_campaign
against a scripted fake host (tests/support/seam_host.py) or a scripted runner
(tests/support/scripted_runner.py)."""
