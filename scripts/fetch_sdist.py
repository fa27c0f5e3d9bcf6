#!/usr/bin/env python3
"""Downloads one source distribution from the Python package index and
checks it against the SHA-256 the index publishes:

    fetch_sdist.py NAME VERSION DIR      -> DIR/<the sdist's file name>

`pip download --no-binary :all:` does the same but first builds the
package's metadata with its build backend (for llama-cpp-python that is
scikit-build-core and CMake in an isolated environment: 3-4 minutes here);
setup only needs the archive. It reads pip's index through the simple
repository API in its JSON form (PEP 691; ER_PYPI_SIMPLE overrides the
address), and the system certificate store verifies it, as for pip.
Exit status 1 with a message on any failure, so the caller can fall back
to pip."""
import hashlib
import json
import os
import sys
import urllib.request


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    name, version, out = sys.argv[1:]
    index = os.environ.get("ER_PYPI_SIMPLE", "https://pypi.org/simple")
    want = f"{name.replace('-', '_')}-{version}.tar.gz".lower()
    try:
        req = urllib.request.Request(f"{index}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            meta = json.load(r)
        files = [f for f in meta["files"] if f["filename"].lower() == want and not f.get("yanked")]
        if not files:
            raise ValueError(f"the index lists no {want}")
        u = files[0]
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, os.path.basename(u["filename"]))
        h = hashlib.sha256()
        with urllib.request.urlopen(u["url"], timeout=300) as r, open(path + ".part", "wb") as f:
            for block in iter(lambda: r.read(1 << 20), b""):
                h.update(block)
                f.write(block)
        if h.hexdigest() != u["hashes"].get("sha256"):
            os.remove(path + ".part")
            raise ValueError(f"{u['filename']}: SHA-256 {h.hexdigest()} is not the index's {u['hashes']}")
        os.replace(path + ".part", path)
        print(path)
    except Exception as e:  # noqa: BLE001 - one message, the caller falls back
        print(f"fetch_sdist: {name}=={version}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
