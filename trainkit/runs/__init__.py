"""Runs: the run record (record.py: run.json, events.jsonl, the job), the launcher (launch.py), what
the nodes hold of a run (remote.py), a run's live status and log follower (status.py), and the
recovery loop (recover.py: watch, replace a reclaimed node, resume)."""
