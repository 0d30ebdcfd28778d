"""Data staging: the `data:` section (section.py), fetching its sources onto a node with ranged,
resumable, verified downloads (fetch.py), and the object stores it reads (stores.py)."""
