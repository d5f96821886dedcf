"""The evidence on disk: one JSON line per attempt, appended and fsync'd, and what reads it back.

Modules: ``store`` (attempts.jsonl, streams, events, amendments, torn-tail repair),
``stream_file`` (one attempt's stream file, kept under its cap, and read a line at a time),
``disk_caps`` (what streams and netconsole files may take of the disk, per file and per campaign),
``reader`` (attempts.jsonl read back as typed records, amendments folded: the one reader
of records), ``history`` (a campaign folder as a resume reads it, once), ``manifest`` (the inputs
campaign.json keeps: the playbook's copy, the PoC's and the inventory's digests), ``identity`` (what makes two cells the same experiment), ``pooling`` (records of many
campaigns and controllers pooled), ``facts_cache`` (the last facts seen of each host), ``host_stack`` (the kernel, driver, CUDA
and VBIOS a host's facts name, and what changed between two facts), ``host_hold`` (when this
campaign last held a silent host, and its last switch of it: what a resume reads instead of
the host's lease), ``gpu_settings`` (the GPU
settings read back before an attempt against what its cell planned),
``folder_state`` (where a campaign stands, read from its folder alone), ``prometheus``
(the textfile format, and the controller's heartbeat read back from it), ``export``
(``invoke export``: one row per attempt, amendments folded, as CSV, Parquet or JSON lines),
``private_files`` (campaign folders 0700 and files 0600, opened without following a link),
``csv_cells`` (a text cell of the export never starts a formula), ``host_text`` (a host's text
without escape sequences or control characters: where every output's sanitizer starts).
"""
