"""Provisioning: the inventory (inventory.py), the playbook runner (playbook.py: ansible-runner), the
node wheel (wheel.py), and reaching nodes over ssh (reach.py)."""
