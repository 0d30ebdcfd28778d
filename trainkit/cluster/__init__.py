"""The cluster as a whole: apply / status / destroy (lifecycle.py, teardown.py), check (credentials and
tools), top (live node view), and node replacement after a reclaim (replace.py)."""
