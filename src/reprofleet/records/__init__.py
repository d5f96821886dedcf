"""The evidence on disk: one JSON line per attempt, appended and fsync'd, and what reads it back.

Modules: ``store`` (attempts.jsonl, streams, events, amendments, torn-tail repair),
``reader`` (attempts.jsonl read back as typed records, amendments folded: the one reader
of records), ``history`` (a campaign folder as a resume reads it, once), ``manifest`` (the inputs
campaign.json keeps: the playbook's copy, the PoC's and the inventory's digests), ``identity`` (what makes two cells the same experiment), ``pooling`` (records of many
campaigns and controllers pooled), ``facts_cache`` (the last facts seen of each host), ``host_stack`` (the kernel, driver, CUDA
and VBIOS a host's facts name, and what changed between two facts), ``gpu_settings`` (the GPU
settings read back before an attempt against what its cell planned),
``folder_state`` (where a campaign stands, read from its folder alone), ``prometheus``
(the textfile format, and the controller's heartbeat read back from it), ``export``
(``invoke export``: one row per attempt, amendments folded, as CSV, Parquet or JSON lines).
"""
