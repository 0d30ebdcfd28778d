"""trainkit: provision GPU training clusters, train PyTorch on them, tear them down.

The control side (spec, catalog, render, review, terraform, provision) never imports torch;
only `trainkit.train` does.
"""

__version__ = "0.1.0"
