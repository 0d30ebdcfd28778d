"""Money: the one cost model (cost.py: price per node, per cluster, per run, what runs now), billing
plans (billing.py), spot against on-demand for the same work (spot.py, with the clouds' published
reclaim figures in reclaims.py) and price refreshes from the clouds' price APIs (prices.py)."""
