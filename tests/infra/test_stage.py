"""Data staging against a real moto S3 server and a 127.0.0.1 HTTP server with Range support."""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile

import pytest

from trainkit.errors import InputError
from trainkit.staging.fetch import MARKER, StageError, plan_ranges, stage
from trainkit.staging.section import load_section
from trainkit.staging.stores import open_store

CHUNK_MB = 0.25  # 256 KiB ranges: the 5 MiB object is fetched in 21 ranges


def section(*sources, **kw):
    return load_section({"connections": 6, "chunk_mb": CHUNK_MB, "sources": list(sources), **kw})


class Counting:
    """Wraps a real store: counts range reads, and can fail or corrupt one of them."""

    def __init__(self, fail_after=None, corrupt_key=None):
        self.reads, self.fail_after, self.corrupt_key = [], fail_after, corrupt_key

    def __call__(self, url, endpoint=None, region=None):
        real = open_store(url, endpoint, region)
        outer = self

        class Store:
            def list(self):
                return real.list()

            def read(self, key, start, end):
                if outer.fail_after is not None and len(outer.reads) >= outer.fail_after:
                    raise ConnectionResetError("network dropped (injected)")
                outer.reads.append((key, start, end))
                data = real.read(key, start, end)
                if key == outer.corrupt_key and start == 0:
                    data = bytes([data[0] ^ 0xFF]) + data[1:]
                return data
        return Store()


def test_ranges_cover_the_object_exactly():
    assert plan_ranges(10, 4) == [(0, 3), (4, 7), (8, 9)]
    assert plan_ranges(0, 4) == []


def test_a_prefix_of_many_objects_and_a_large_object_in_ranges(s3_data, tmp_path):
    _, blobs = s3_data
    store = Counting()
    rows = stage(section({"url": "s3://data/set/"}, {"url": "s3://data/big.bin", "name": "big"}),
                 tmp_path, store)
    assert (tmp_path / "set" / "a.txt").read_bytes() == blobs["set/a.txt"]
    assert (tmp_path / "set" / "sub" / "c.bin").read_bytes() == blobs["set/sub/c.bin"]
    assert (tmp_path / "big" / "big.bin").read_bytes() == blobs["big.bin"]
    big_reads = [r for r in store.reads if r[0] == "big.bin"]
    assert len(big_reads) == len(plan_ranges(len(blobs["big.bin"]), int(CHUNK_MB * 2**20))) > 1
    assert {r["status"] for r in rows} == {"downloaded"}
    # staged once: a second run finds everything present and verified, and reads nothing
    again = Counting()
    rows = stage(section({"url": "s3://data/set/"}, {"url": "s3://data/big.bin", "name": "big"}),
                 tmp_path, again)
    assert again.reads == [] and {r["status"] for r in rows} == {"present"}


def test_an_interrupted_download_resumes_with_only_the_missing_ranges(s3_data, tmp_path):
    _, blobs = s3_data
    src = {"url": "s3://data/big.bin", "name": "big"}
    first = Counting(fail_after=8)
    with pytest.raises(ConnectionResetError):
        stage(load_section({"connections": 1, "chunk_mb": CHUNK_MB, "sources": [src]}), tmp_path, first)
    assert not (tmp_path / "big" / "big.bin").exists()  # never a partial file under the final name
    assert (tmp_path / "big" / "big.bin.part.json").exists()
    second = Counting()
    rows = stage(section(src), tmp_path, second)
    total = len(plan_ranges(len(blobs["big.bin"]), int(CHUNK_MB * 2**20)))
    assert len(second.reads) == total - len(first.reads)
    assert rows[0]["resumed_bytes"] == len(first.reads) * int(CHUNK_MB * 2**20)
    assert (tmp_path / "big" / "big.bin").read_bytes() == blobs["big.bin"]


def test_a_corrupted_object_is_detected_by_its_md5_etag_and_not_kept(s3_data, tmp_path):
    with pytest.raises(StageError, match="corrupted download, MD5"):
        stage(section({"url": "s3://data/big.bin", "name": "big"}), tmp_path, Counting(corrupt_key="big.bin"))
    assert not list((tmp_path / "big").glob("big.bin*"))


def test_a_wrong_sha256_is_detected(s3_data, tmp_path):
    with pytest.raises(StageError, match="sha256"):
        stage(section({"url": "s3://data/set/a.txt", "sha256": "0" * 64}), tmp_path)


def test_https_with_ranges_sha256_and_an_archive_unpacked(range_http, tmp_path):
    www, url = range_http
    blob = os.urandom(100_000)  # incompressible: the archive spans many 10 KiB ranges
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w:gz") as tar:
        for name, body in {"digits/train.bin": blob, "digits/README": b"hi"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    (www / "digits.tar.gz").write_bytes(payload.getvalue())
    sha = hashlib.sha256(payload.getvalue()).hexdigest()
    store = Counting()
    src = {"url": f"{url}/digits.tar.gz", "name": "ds", "sha256": sha}
    stage(load_section({"chunk_mb": 0.01, "sources": [src]}), tmp_path / "root", store)
    assert len(store.reads) > 1  # many ranges
    assert (tmp_path / "root" / "ds" / "digits" / "train.bin").read_bytes() == blob
    assert MARKER in {p.name for p in (tmp_path / "root" / "ds").iterdir()}
    again = Counting()
    stage(load_section({"sources": [src]}), tmp_path / "root", again)
    assert again.reads == []


def test_bad_sections_name_the_field():
    with pytest.raises(InputError, match=r"data.sources.0.sha256"):
        load_section({"sources": [{"url": "s3://b/k", "sha256": "nothex"}]})
    with pytest.raises(InputError, match=r"data.sources.0.url: .*use one of .*oss://"):
        load_section({"sources": [{"url": "ftp://host/file"}]})
    with pytest.raises(InputError, match="unknown scheme 'ftp'"):
        open_store("ftp://host/file")


def test_object_keys_that_would_leave_the_data_folder_are_refused_before_any_download(s3_data, tmp_path):
    client, _ = s3_data
    for key in ("evil//abs.txt", "evil/a/../../../x.txt"):  # keys are the store owner's text, not paths
        client.put_object(Bucket="data", Key=key, Body=b"x")
        client.put_object(Bucket="data", Key="evil/ok.txt", Body=b"ok")
        root = tmp_path / key.replace("/", "_") / "root"
        with pytest.raises(StageError, match=r"would be written outside .*root/evil"):
            stage(section({"url": "s3://data/evil/"}), root)
        assert not root.exists() or not [p for p in root.rglob("*") if p.is_file()]
        client.delete_object(Bucket="data", Key=key)
    assert not (tmp_path / "x.txt").exists()


def test_a_data_name_or_url_of_dots_and_a_url_without_a_bucket_are_bad_input():
    for src, expected in [({"url": "s3://data/set/", "name": ".."}, "data.sources.0.name: '..' is the data root"),
                          ({"url": "s3://"}, "data.sources.0.url: 's3://' names no bucket")]:
        with pytest.raises(InputError, match=re.escape(expected)):
            load_section({"sources": [src]})

