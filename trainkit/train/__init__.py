"""What runs on the nodes: config, dist, data, model, checkpoint, monitor, export, engine.

Importing this package imports nothing heavy; `trainkit.train.config` and `trainkit.train.schedule`
are torch-free, every other module imports torch.
"""
