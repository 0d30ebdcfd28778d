"""Provisioning: the inventory (inventory.py), the playbook runner (playbook.py: ansible-runner), the
node wheel (wheel.py), the nodes read back from the inventory and run over ssh (node.py), and
waiting for SSH to come up (reach.py)."""
