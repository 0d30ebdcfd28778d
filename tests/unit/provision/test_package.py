"""trainkit.provision.wheel: an installed distribution zipped again as a wheel pip accepts (what an
installed trainkit ships to the nodes). Exercised on `click`, installed from a wheel here."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile

from trainkit.provision.wheel import repack_installed


def test_an_installed_distribution_repacks_into_an_installable_wheel(tmp_path):
    wheel = repack_installed(tmp_path / "wheels", "click")
    assert repack_installed(tmp_path / "wheels", "click") == wheel  # cached by content
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        record = zf.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
        for line in record.splitlines():
            name, digest, size = line.rsplit(",", 2)
            if digest:  # every file's hash and size match what the wheel holds
                data = zf.read(name)
                expect = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                assert digest == f"sha256={expect}" and int(size) == len(data), name
    assert "click/__init__.py" in names and not any("__pycache__" in n for n in names)
    assert not any(n.endswith(("/INSTALLER", "/direct_url.json")) for n in names)
    target = tmp_path / "target"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           "--target", str(target), str(wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (target / "click" / "__init__.py").is_file()
