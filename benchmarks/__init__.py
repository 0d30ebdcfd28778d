"""Side-by-side benchmarks (`python -m benchmarks`, or one module: `python -m benchmarks.bench_NAME`).

The clusters a benchmark applies are throwaway: they are registered in a state folder of their own
(TRAINKIT_STATE_DIR, a fresh temporary folder unless the caller set one), never in the user's list
of clusters (`trainkit status`), which would otherwise keep naming folders that are gone.
"""

import os
import tempfile

if not os.environ.get("TRAINKIT_STATE_DIR"):
    os.environ["TRAINKIT_STATE_DIR"] = tempfile.mkdtemp(prefix="trainkit-bench-state-")
