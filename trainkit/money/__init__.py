"""Money: the one cost model (cost.py: price per node, per cluster, per run, what runs now), billing
plans (billing.py) and price refreshes from the clouds' price APIs (prices.py)."""
