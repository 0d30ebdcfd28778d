"""The cluster spec: its schema (schema.py) and checks (checks.py), problems with field paths
(problems.py), resolve (spec + catalog -> Cluster), safety nets (ttl, idle), ssh key rules, and the
train-config check run on the controller (train_config.py)."""
